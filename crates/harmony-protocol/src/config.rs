//! What a device fetches: `GET /v1/collections/{id}/config`.
//!
//! The published config is the analyst's [`CreateCollection`](crate::CreateCollection) with every
//! choice the server made written out (defaults, a range hierarchy's branching, CALM's
//! materialized sets, a model's dimension and step), so that every device and every later
//! analysis builds exactly the same randomizer and aggregator from it.
//!
//! Versions: 3 is this format. Collections stored by earlier servers (1: record means; 2: model
//! rounds, with `strategy`, `tasks` and `train` fields) are read by [`CollectionConfig::from_json`],
//! which converts them.

use crate::spec::{MeansSpec, TaskSpec, TrainSpec};
use harmony_core::schema::Schema;
use harmony_core::strategy::StrategyOptions;
use serde::{Deserialize, Serialize};

/// The version of [`CollectionConfig`]'s format.
pub const CONFIG_VERSION: u32 = 3;

/// `GET /v1/collections/{id}/config`: everything a device needs to randomize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CollectionConfig {
    /// The collection id.
    pub id: String,
    /// Version of this document's format ([`CONFIG_VERSION`]).
    pub config_version: u32,
    /// Wire version of the reports ([`harmony_core::wire::WIRE_VERSION`]).
    pub wire_version: u8,
    /// The attributes a device holds (none for heavy hitters over sets of strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
    /// ε of one device's report.
    pub epsilon: f64,
    /// The task with every option written out.
    pub task: TaskSpec,
    /// The training setup the server fixed at creation (`train` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<TrainPublished>,
    /// A recurring collection: it asks each device for one report per period (the collection's
    /// bucket period), each charged to the device's budget; absent: one report per device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurring: Option<crate::Period>,
}

/// The published training setup: what the server fixed at creation besides the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TrainPublished {
    /// Feature dimension d (intercept first).
    pub dimension: usize,
    /// Feature names, in order.
    pub features: Vec<String>,
    /// Coordinates each device samples and reports.
    pub sampled: usize,
    /// The constant step γ of the `noise` schedule, computed once at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<f64>,
}

/// `POST /v1/collections` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Created {
    /// The new collection's id.
    pub id: String,
    /// Its client configuration.
    pub config: CollectionConfig,
}

impl CollectionConfig {
    /// The schema, or an error naming the task that needs one.
    pub fn schema(&self) -> harmony_core::Result<&Schema> {
        self.schema.as_ref().ok_or_else(|| {
            harmony_core::Error::param("schema", "none", format!("a schema (task {} reads a record)", self.task.kind()))
        })
    }

    /// Parses a stored or fetched config of any version (1, 2 or 3); earlier versions are
    /// converted to this format (their `config_version` is kept, so a device randomizing for an
    /// old collection still sends the version the server expects).
    pub fn from_json(text: &str) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Version {
            config_version: u32,
        }
        let v: Version = serde_json::from_str(text).map_err(|e| format!("config: {e}"))?;
        match serde_json::from_str::<CollectionConfig>(text) {
            Ok(c) => Ok(c),
            Err(e) if v.config_version >= CONFIG_VERSION => Err(format!("config (version {}): {e}", v.config_version)),
            Err(_) => serde_json::from_str::<Legacy>(text)
                .map(Legacy::convert)
                .map_err(|e| format!("config (version {}): {e}", v.config_version)),
        }
    }
}

/// A version 1 or 2 config: a record strategy, a list of tasks (`means` or `train`) and the
/// training setup with its spec inside.
#[derive(Deserialize)]
struct Legacy {
    id: String,
    config_version: u32,
    wire_version: u8,
    schema: Schema,
    strategy: StrategyOptions,
    #[serde(default)]
    tasks: Vec<String>,
    #[serde(default)]
    train: Option<LegacyTrain>,
}

#[derive(Deserialize)]
struct LegacyTrain {
    spec: TrainSpec,
    dimension: usize,
    features: Vec<String>,
    sampled: usize,
    #[serde(default)]
    step: Option<f64>,
}

impl Legacy {
    fn convert(self) -> CollectionConfig {
        let (task, train) = match self.train {
            Some(t) if self.tasks.iter().any(|t| t == "train") => (
                TaskSpec::Train(t.spec),
                Some(TrainPublished { dimension: t.dimension, features: t.features, sampled: t.sampled, step: t.step }),
            ),
            _ => (
                TaskSpec::Means(MeansSpec {
                    strategy: self.strategy.kind,
                    numeric_mechanism: Some(self.strategy.numeric_mechanism),
                    categorical_mechanism: Some(self.strategy.categorical_mechanism),
                    k: Some(self.strategy.k),
                }),
                None,
            ),
        };
        CollectionConfig {
            id: self.id,
            config_version: self.config_version,
            wire_version: self.wire_version,
            schema: Some(self.schema),
            epsilon: self.strategy.epsilon,
            task,
            train,
            recurring: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Model, Schedule};

    #[test]
    fn version_1_and_2_configs_convert() {
        let v1 = r#"{"id":"a1","config_version":1,"wire_version":1,
            "schema":[{"kind":"numeric","name":"x","min":0,"max":1}],
            "strategy":{"kind":"sample-k","epsilon":2,"numeric_mechanism":"pm","categorical_mechanism":"olh","k":"Optimal"},
            "tasks":["means"]}"#;
        let c = CollectionConfig::from_json(v1).unwrap();
        assert_eq!((c.config_version, c.epsilon), (1, 2.0));
        let TaskSpec::Means(m) = &c.task else { panic!("{c:?}") };
        assert_eq!(m.numeric_mechanism, Some(harmony_core::RecordNumeric::Pm));
        assert_eq!(m.k, Some(harmony_core::strategy::KChoice::Optimal));
        let v2 = r#"{"id":"b2","config_version":2,"wire_version":1,
            "schema":[{"kind":"numeric","name":"x","min":0,"max":1},{"kind":"numeric","name":"y","min":0,"max":1}],
            "strategy":{"kind":"harmony","epsilon":1,"numeric_mechanism":"duchi","categorical_mechanism":"hadamard","k":"Optimal"},
            "tasks":["train"],
            "train":{"spec":{"task":"linear","target":"y","batch_size":10,"schedule":"noise","kappa":2,"gradient_scale":2,"rounds":5},
                     "dimension":2,"features":["intercept","x"],"sampled":1,"step":0.5}}"#;
        let c = CollectionConfig::from_json(v2).unwrap();
        let TaskSpec::Train(t) = &c.task else { panic!("{c:?}") };
        assert_eq!((t.task, t.schedule, t.batch_size), (Model::Linear, Some(Schedule::Noise), 10));
        assert_eq!(c.train.as_ref().unwrap().step, Some(0.5));
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(CollectionConfig::from_json(&text).unwrap(), CollectionConfig { config_version: 2, ..c.clone() });
        assert!(CollectionConfig::from_json("{\"config_version\": 3}").unwrap_err().contains("version 3"));
    }
}
