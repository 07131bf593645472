//! The device's privacy policy: what the app (never the server) lets a collection ask of this
//! device. A [`DeviceTask`](crate::DeviceTask) checks the fetched config against it before it
//! builds any randomizer, and applies it to every input before any randomization.
//!
//! * `max_epsilon`: the largest ε one collection may spend (one report, or one gradient of a
//!   training collection: a device contributes once per collection). The
//!   [default](Policy::default) is [`DEFAULT_MAX_EPSILON`] = 10.
//! * `approximate` and `max_delta`: whether (ε, δ) mechanisms (the Gaussian mechanism) are
//!   allowed at all (default `false`: only pure ε-LDP runs, whatever δ the server states) and
//!   the largest δ one collection may spend (default [`DEFAULT_MAX_DELTA`] = 10⁻⁹). δ is
//!   charged in the budget next to ε.
//! * `tasks`: the tasks allowed (`None`: every task, the default).
//! * `mechanisms`: the mechanism, strategy and method names allowed (`None`: every one, the
//!   default), matched against the names the config writes out (`strategy`,
//!   `numeric_mechanism`, `categorical_mechanism`, `mechanism`, `method`) and against the
//!   mechanisms the built task runs ([`Policy::check_built`]: a field the config omits, or one
//!   a strategy overrides, is checked by what runs).
//! * `budget`: at most `epsilon` (and `delta`, default 0) in total over any rolling window of
//!   `days` days, across
//!   collections (sequential composition), charged by the device's budget ledger
//!   ([`crate::budget`]) keyed by the collection id the device asked for (`None`: no budget,
//!   the default). Written `"E/DAYS"` (`"2/1"`: ε 2 a day) or as a table
//!   `{ epsilon = 2, days = 1 }` (with δ: `{ epsilon = 2, days = 1, delta = 1e-8 }`).
//! * Recurring collections (the config's `recurring`: one report per hour, day or week) are
//!   refused unless the policy sets a `budget`: each period's report is a new charge, keyed by
//!   the collection and the period's start, so the budget's rolling window bounds their total.
//! * `series_refresh`: for recurring series, the collections per permanent report
//!   ([`crate::memo`]; `None`: one for the whole series, the default).
//! * Values the config cannot encode (the browser and Python SDKs, which encode raw values
//!   with the server's schema): a missing value the config's missing policy refuses, or a
//!   label outside the config's categories, is replaced by a uniformly random value
//!   ([`fallback`]); the report is sent either way.
//! * Out-of-range values: a numeric value outside [-1, 1] is clamped to the nearest end, a
//!   non-finite one becomes 0 (the middle of the range). The device clamps, never skips: whether
//!   it reports does not depend on its data (a skipped report would itself tell the server that
//!   the value was out of range). Clamping is local post-processing of the input, so ε is
//!   unchanged; the estimate is that of the clamped values.
//!
//! Every refusal is [`ClientError::Policy`] naming the rule, the value and the limit. The policy
//! is plain data (no files, no threads): the browser SDK builds one from JSON, the CLI from its
//! flags and a TOML file (`harmony submit --policy FILE`).
//!
//! # The default policy
//! `max_epsilon = 10`, pure ε-LDP only (`approximate = false`), every task, every mechanism,
//! no budget. The SDK cannot choose where a
//! budget ledger persists, so the app sets the budget (e.g. `budget = "10/1"`) together with a
//! [`BudgetStore`](crate::budget::BudgetStore) (`Device::with_budget`); a policy with a budget
//! refuses every collection on a device without one.

use crate::{ClientError, Result};
use harmony_core::schema::Value;
use harmony_protocol::{CollectionConfig, TaskKind};
use serde::{Deserialize, Serialize};

/// The default largest ε per collection.
pub const DEFAULT_MAX_EPSILON: f64 = 10.0;

/// The default largest δ per collection, for a policy that allows (ε, δ) mechanisms at all
/// (`approximate = true`; see docs/THREAT-MODEL.md for the choice: δ is the probability that
/// the ε bound fails outright, so it must be far below 1/n for n devices; 10⁻⁹ leaves a
/// device that reports to 10⁶ such collections a total δ of 10⁻³).
pub const DEFAULT_MAX_DELTA: f64 = 1e-9;

/// A device's privacy policy (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The largest ε one collection may spend.
    pub max_epsilon: f64,
    /// Whether (ε, δ) mechanisms (δ > 0: the Gaussian mechanism) are allowed at all (default
    /// `false`: pure ε-LDP only).
    #[serde(default)]
    pub approximate: bool,
    /// The largest δ one collection may spend when `approximate` is set (default
    /// [`DEFAULT_MAX_DELTA`]).
    #[serde(default = "default_max_delta")]
    pub max_delta: f64,
    /// The tasks allowed (`None`: every task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskKind>>,
    /// The mechanism, strategy and method names allowed (`None`: every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanisms: Option<Vec<String>>,
    /// The largest total ε over a rolling window, across collections (`None`: no budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Heavy hitters with `items = "id"`: the app's largest item id. When set, a config whose
    /// code length cannot encode every id up to it is refused before any data is read (an id
    /// the code cannot hold would otherwise be an error that depends on the data). `None`: not
    /// declared (such configs are accepted; an id beyond the code is then refused by the task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_item_id: Option<u64>,
    /// Recurring series: the collections per epoch of a permanent report ([`crate::memo`];
    /// `None`: one permanent report for the whole series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_refresh: Option<u64>,
}

/// At most `epsilon` (and `delta`) in total over any rolling window of `days` days.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BudgetRepr", into = "BudgetRepr")]
pub struct Budget {
    /// The largest total ε in a window.
    pub epsilon: f64,
    /// The window, in days (fractions allowed).
    pub days: f64,
    /// The largest total δ in a window (default 0: a collection with δ > 0 does not fit).
    pub delta: f64,
}

/// `"E/DAYS"` or `{ epsilon, days }`.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum BudgetRepr {
    Text(String),
    Table(BudgetTable),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetTable {
    epsilon: f64,
    days: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    delta: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl TryFrom<BudgetRepr> for Budget {
    type Error = String;
    fn try_from(r: BudgetRepr) -> std::result::Result<Self, String> {
        let b = match r {
            BudgetRepr::Text(s) => return s.parse::<Budget>().map_err(|e| e.to_string()),
            BudgetRepr::Table(t) => Budget { epsilon: t.epsilon, days: t.days, delta: t.delta },
        };
        b.check().map_err(|e| e.to_string())?;
        Ok(b)
    }
}

impl From<Budget> for BudgetRepr {
    fn from(b: Budget) -> Self {
        BudgetRepr::Table(BudgetTable { epsilon: b.epsilon, days: b.days, delta: b.delta })
    }
}

impl Budget {
    /// A budget of `epsilon` per `days` days, both finite and > 0 (and no δ).
    pub fn new(epsilon: f64, days: f64) -> Result<Self> {
        let b = Budget { epsilon, days, delta: 0.0 };
        b.check()?;
        Ok(b)
    }
    /// The same budget with a total δ of `delta` ∈ [0, 1) per window.
    pub fn with_delta(self, delta: f64) -> Result<Self> {
        let b = Budget { delta, ..self };
        b.check()?;
        Ok(b)
    }
    fn check(&self) -> Result<()> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(refuse("policy.budget.epsilon", self.epsilon, "a finite ε > 0"));
        }
        if !(self.days.is_finite() && self.days > 0.0 && self.days * crate::budget::DAY as f64 >= 1.0) {
            return Err(refuse("policy.budget.days", self.days, "a finite number of days ≥ 1 second"));
        }
        if !(0.0..1.0).contains(&self.delta) {
            return Err(refuse("policy.budget.delta", self.delta, "a number in [0, 1)"));
        }
        Ok(())
    }
    /// The window in seconds.
    pub fn window_seconds(&self) -> f64 {
        self.days * crate::budget::DAY as f64
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = if self.days == 1.0 { "day" } else { "days" };
        write!(f, "ε {} per {} {unit}", self.epsilon, self.days)?;
        if self.delta > 0.0 {
            write!(f, ", δ {:e}", self.delta)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Budget {
    type Err = ClientError;
    /// `E/DAYS`, e.g. `2/1` (ε 2 a day) or `8/7`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || refuse("policy.budget", format!("{s:?}"), "E/DAYS with E and DAYS numbers > 0, e.g. 2/1");
        let (e, d) = s.split_once('/').ok_or_else(bad)?;
        let e: f64 = e.trim().parse().map_err(|_| bad())?;
        let d: f64 = d.trim().parse().map_err(|_| bad())?;
        Budget::new(e, d)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_epsilon: DEFAULT_MAX_EPSILON,
            approximate: false,
            max_delta: DEFAULT_MAX_DELTA,
            tasks: None,
            mechanisms: None,
            budget: None,
            max_item_id: None,
            series_refresh: None,
        }
    }
}

fn default_max_delta() -> f64 {
    DEFAULT_MAX_DELTA
}

/// The δ of a config's mechanism: the Gaussian linear-queries mechanism's stated δ (`None`
/// when it states none: the device never assumes a default), 0 for every other (pure ε-LDP).
pub fn delta_of(config: &CollectionConfig) -> Option<f64> {
    config.task.delta()
}

pub(crate) fn refuse(rule: &str, value: impl ToString, limit: impl ToString) -> ClientError {
    ClientError::Policy { rule: rule.into(), value: value.to_string(), limit: limit.to_string() }
}

impl Policy {
    /// The default policy with another largest ε per collection.
    pub fn with_max_epsilon(max_epsilon: f64) -> Result<Self> {
        let p = Policy { max_epsilon, ..Policy::default() };
        p.check_self()?;
        Ok(p)
    }

    /// The policy itself is usable: `max_epsilon` a positive finite number, the budget's ε and
    /// days too.
    pub fn check_self(&self) -> Result<()> {
        if !(self.max_epsilon.is_finite() && self.max_epsilon > 0.0) {
            return Err(refuse("policy.max_epsilon", self.max_epsilon, "a finite number > 0"));
        }
        if !(0.0..1.0).contains(&self.max_delta) {
            return Err(refuse("policy.max_delta", self.max_delta, "a number in [0, 1)"));
        }
        if self.series_refresh == Some(0) {
            return Err(refuse("policy.series_refresh", 0, "a number of collections ≥ 1"));
        }
        match &self.budget {
            Some(b) => b.check(),
            None => Ok(()),
        }
    }

    /// Checks a fetched config: its ε, its task and every mechanism it names.
    pub fn check(&self, config: &CollectionConfig) -> Result<()> {
        self.check_self()?;
        // NaN is refused too (it is not <= any limit).
        if config.epsilon.is_nan() || config.epsilon > self.max_epsilon {
            return Err(refuse("max_epsilon", config.epsilon, self.max_epsilon));
        }
        self.check_delta(config)?;
        self.check_item_ids(config)?;
        // A recurring collection spends ε every period: only a budget over a rolling window
        // bounds what it takes in all.
        if let (Some(p), None) = (config.recurring, &self.budget) {
            let value = format!("a collection recurring every {}", p.name());
            return Err(refuse("recurring", value, "a policy with a budget (one report per period is charged to it)"));
        }
        let kind = config.task.kind();
        if let Some(tasks) = &self.tasks
            && !tasks.contains(&kind)
        {
            let names: Vec<&str> = tasks.iter().map(|t| t.name()).collect();
            return Err(refuse("tasks", kind.name(), names.join(", ")));
        }
        if let Some(allowed) = &self.mechanisms {
            for name in config.task.mechanism_names() {
                if !allowed.iter().any(|a| a == name) {
                    return Err(refuse("mechanisms", name, allowed.join(", ")));
                }
            }
        }
        Ok(())
    }

    /// The config's δ: 0 always passes; δ > 0 only with `approximate` and at most `max_delta`
    /// (a Gaussian config that states no δ is refused).
    fn check_delta(&self, config: &CollectionConfig) -> Result<()> {
        match delta_of(config) {
            Some(0.0) => Ok(()),
            None => Err(refuse("max_delta", "no δ stated by an (ε, δ) mechanism", self.max_delta)),
            Some(d) if !self.approximate => Err(refuse(
                "approximate",
                format!("an (ε, δ) mechanism with δ {d}"),
                "pure ε-LDP only (set approximate = true to allow δ > 0)",
            )),
            Some(d) if d.is_nan() || d < 0.0 || d > self.max_delta => Err(refuse("max_delta", d, self.max_delta)),
            Some(_) => Ok(()),
        }
    }

    /// A heavy-hitters config with `items = "id"` covers the app's declared ids: with B bits the
    /// codes 0 … 2^B − 2 are ids (2^B − 1 pads), so every id ≤ `max_item_id` needs
    /// `max_item_id < 2^B − 1`.
    fn check_item_ids(&self, config: &CollectionConfig) -> Result<()> {
        let (Some(max), Some(bits)) = (self.max_item_id, harmony_tasks::id_code_bits(&config.task)) else {
            return Ok(());
        };
        let bits = bits.min(64);
        let padding = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        if max >= padding {
            let value = format!("ids up to {max} in codes of {bits} bits (ids < {padding})");
            return Err(refuse("max_item_id", value, "a code length that holds every id of the app"));
        }
        Ok(())
    }

    /// Checks the names of the mechanisms a built task runs (see [`DeviceTask`](crate::DeviceTask)):
    /// each must be in `mechanisms` when the policy has an allowlist.
    pub fn check_built<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        if let Some(allowed) = &self.mechanisms {
            for name in names {
                if !allowed.iter().any(|a| a == name) {
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

/// A data-independent value for `attribute`: uniform over [-1, 1] (numeric) or over its
/// categories, drawn from `rng`. What a device randomizes in place of a value the server's
/// config cannot encode (a missing value under a missing policy of `error`, a label outside
/// the server's list), so that whether it reports never depends on its data: the report is
/// that of a uniformly random value, which any ε-LDP mechanism keeps within e^ε of the report
/// of every real value.
pub fn fallback(attribute: &harmony_core::schema::Attribute, rng: &mut dyn rand::Rng) -> Value {
    use harmony_core::sampling::{uniform_below, uniform_in};
    match attribute {
        harmony_core::schema::Attribute::Numeric { .. } => Value::Unit(uniform_in(rng, -1.0, 1.0)),
        a => Value::Category(uniform_below(rng, a.cardinality() as u64) as u32),
    }
}

/// The mechanism, strategy and method names a config's task spec writes out.
pub fn mechanisms_of(config: &CollectionConfig) -> Vec<String> {
    config.task.mechanism_names().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_protocol::spec::TaskSpec;

    /// The fields of a config's task spec that name a mechanism, a strategy or a method.
    const FIELDS: [&str; 5] = ["strategy", "numeric_mechanism", "categorical_mechanism", "mechanism", "method"];

    /// The names as the config's JSON writes them.
    fn from_json(config: &CollectionConfig) -> Vec<String> {
        let spec = serde_json::to_value(&config.task).unwrap();
        FIELDS.iter().filter_map(|f| spec.get(*f).and_then(|v| v.as_str()).map(str::to_string)).collect()
    }

    #[test]
    fn mechanism_names_are_those_the_config_writes_out() {
        use harmony_core::schema::{Attribute, Schema};
        use harmony_protocol::CreateCollection;
        use harmony_protocol::spec::{FrequencySpec, MeansSpec};
        let schema = Schema::new(vec![
            Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 },
            Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into(), "c".into()] },
        ])
        .unwrap();
        let mut tasks = vec![TaskSpec::Frequency(FrequencySpec { attribute: "c".into(), mechanism: None })];
        use harmony_core::strategy::StrategyKind;
        for strategy in [StrategyKind::Split, StrategyKind::Harmony, StrategyKind::SampleK] {
            tasks.push(TaskSpec::Means(MeansSpec { strategy, ..Default::default() }));
        }
        for task in tasks {
            let req = CreateCollection { schema: Some(schema.clone()), epsilon: 1.0, task };
            let config = harmony_tasks::resolve(&req, "x").unwrap();
            let names = mechanisms_of(&config);
            assert!(!names.is_empty());
            assert_eq!(names, from_json(&config), "{:?}", config.task);
        }
    }
}
