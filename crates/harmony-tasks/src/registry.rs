//! The task registry: an analyst's request → the published config ([`resolve`]), and a config
//! → its [`Task`] ([`build`]), for every task.

use crate::erased::Task;
use crate::{frequency, heavy, marginals, means, train};
use harmony_core::error::{Error, Result};
use harmony_core::params::Epsilon;
use harmony_core::schema::Schema;
use harmony_protocol::spec::TaskSpec;
use harmony_protocol::{CONFIG_VERSION, CollectionConfig, CreateCollection, TaskKind};

/// The schema, or an error naming the task that needs one.
fn schema_for(schema: &Option<Schema>, task: TaskKind) -> Result<&Schema> {
    schema.as_ref().ok_or_else(|| Error::param("schema", "none", format!("a schema (task {task} reads a record)")))
}

/// Validates a request and writes out every choice (defaults, plans, a model's setup): the
/// config a collection `id` publishes. Errors name the field (`epsilon`, `task.attribute`, …),
/// the value and what was expected.
pub fn resolve(req: &CreateCollection, id: &str) -> Result<CollectionConfig> {
    let eps = Epsilon::new(req.epsilon)?.value();
    let kind = req.task.kind();
    let mut train = None;
    let task = match &req.task {
        TaskSpec::Means(s) => TaskSpec::Means(means::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::Frequency(s) => TaskSpec::Frequency(frequency::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::HeavyHitters(s) => TaskSpec::HeavyHitters(heavy::resolve(s, eps)?),
        TaskSpec::Marginals(s) => TaskSpec::Marginals(marginals::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::Train(s) => {
            let (spec, published) = train::resolve(s, schema_for(&req.schema, kind)?, eps)?;
            train = Some(published);
            TaskSpec::Train(spec)
        }
        other => return Err(Error::param("task.kind", other.kind().name(), "a task this build serves")),
    };
    let config = CollectionConfig {
        id: id.to_string(),
        config_version: CONFIG_VERSION,
        wire_version: harmony_core::wire::WIRE_VERSION,
        schema: req.schema.clone(),
        epsilon: eps,
        task,
        train,
    };
    build(&config)?;
    Ok(config)
}

/// The task a config describes (on the server and on every device alike).
pub fn build(config: &CollectionConfig) -> Result<Box<dyn Task>> {
    let c = config.clone();
    Ok(match config.task.kind() {
        TaskKind::Means => Box::new(means::MeansTask::new(c)?),
        TaskKind::Frequency => Box::new(frequency::FrequencyTask::new(c)?),
        TaskKind::HeavyHitters => Box::new(heavy::HeavyHittersTask::new(c)?),
        TaskKind::Marginals => Box::new(marginals::MarginalsTask::new(c)?),
        TaskKind::Train => Box::new(train::TrainTask::new(c)?),
        other => return Err(Error::param("task.kind", other.name(), "a task this build serves")),
    })
}

#[cfg(test)]
mod tests {
    use harmony_core::wire::{ReportKind, WireKind, WireReport};
    use std::collections::HashMap;

    /// Every report type that travels on the wire, with the crate that owns it. Add yours.
    fn kinds() -> Vec<(WireKind, &'static str)> {
        use harmony_analytics::heavy::HeavyHitterReport;
        use harmony_analytics::marginals::fourier::FourierReport;
        use harmony_analytics::marginals::groups::GroupReport;
        let core = [
            ReportKind::Numeric,
            ReportKind::Grr,
            ReportKind::Unary,
            ReportKind::Olh,
            ReportKind::Hadamard,
            ReportKind::HadamardResponse,
            ReportKind::BassilySmith,
            ReportKind::Adaptive,
            ReportKind::HarmonyBit,
            ReportKind::DuchiMulti,
            ReportKind::Record,
        ];
        let mut out: Vec<(WireKind, &str)> = core.iter().map(|k| (k.wire(), "core")).collect();
        out.push((harmony_learn::remote::GradientReport::KIND, "learn"));
        // harmony-analytics: heavy hitters and marginals take 30–39.
        out.extend([
            (HeavyHitterReport::KIND, "analytics"),
            (GroupReport::KIND, "analytics"),
            (FourierReport::KIND, "analytics"),
        ]);
        out
    }

    /// No two report types share a kind byte or a name, and each crate stays in its bytes
    /// (core 1–11 and 13–19, learn 12 and 40–49, analytics 20–39; see `harmony_core::wire::WireKind`).
    #[test]
    fn report_kinds_are_unique_and_in_their_owners_range() {
        let mut seen: HashMap<u8, &str> = HashMap::new();
        for (kind, owner) in kinds() {
            if let Some(other) = seen.insert(kind.byte, kind.name) {
                panic!("kind byte {} is used by {other} and {}", kind.byte, kind.name);
            }
            let ok = match owner {
                "core" => matches!(kind.byte, 1..=11 | 13..=19),
                "learn" => matches!(kind.byte, 12 | 40..=49),
                _ => matches!(kind.byte, 20..=39),
            };
            assert!(ok, "{} ({owner}) has byte {}, outside its range", kind.name, kind.byte);
        }
        let names: std::collections::HashSet<&str> = kinds().iter().map(|(k, _)| k.name).collect();
        assert_eq!(names.len(), kinds().len(), "two report types share a name");
    }
}
