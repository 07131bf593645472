//! The task registry: an analyst's request → the published config ([`resolve`]), and a config
//! → its [`Task`] ([`build`]), for every task.

use crate::erased::Task;
use crate::{frequency, heavy, linear, marginals, means, range, range2d, train};
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
    create(req, id).map(|(config, _)| config)
}

/// [`resolve`], and the task its config describes, built once (a server's create keeps both).
pub fn create(req: &CreateCollection, id: &str) -> Result<(CollectionConfig, Box<dyn Task>)> {
    let eps = Epsilon::new(req.epsilon)?.value();
    let kind = req.task.kind();
    let mut train = None;
    let task = match &req.task {
        TaskSpec::Means(s) => TaskSpec::Means(means::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::Frequency(s) => TaskSpec::Frequency(frequency::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::HeavyHitters(s) => TaskSpec::HeavyHitters(heavy::resolve(s, eps)?),
        TaskSpec::Marginals(s) => TaskSpec::Marginals(marginals::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::Range(s) => TaskSpec::Range(range::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::Range2d(s) => TaskSpec::Range2d(range2d::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::LinearQueries(s) => TaskSpec::LinearQueries(linear::resolve(s, schema_for(&req.schema, kind)?, eps)?),
        TaskSpec::Train(s) => {
            let (spec, published) = train::resolve(s, schema_for(&req.schema, kind)?, eps)?;
            train = Some(published);
            TaskSpec::Train(spec)
        }
    };
    let config = CollectionConfig {
        id: id.to_string(),
        config_version: CONFIG_VERSION,
        wire_version: harmony_core::wire::WIRE_VERSION,
        schema: req.schema.clone(),
        epsilon: eps,
        task,
        train,
        recurring: None,
    };
    let task = build(&config)?;
    Ok((config, task))
}

/// The task of `config`, boxed as the caller's return type asks (`dyn Task` or `dyn
/// DeviceSide`): the one list of every task's constructor.
macro_rules! construct {
    ($config:expr) => {{
        let c = $config.clone();
        match $config.task.kind() {
            TaskKind::Means => Box::new(means::MeansTask::new(c)?),
            TaskKind::Frequency => Box::new(frequency::FrequencyTask::new(c)?),
            TaskKind::HeavyHitters => Box::new(heavy::HeavyHittersTask::new(c)?),
            TaskKind::Marginals => Box::new(marginals::MarginalsTask::new(c)?),
            TaskKind::Range => Box::new(range::RangeTask::new(c)?),
            TaskKind::Range2d => Box::new(range2d::Range2dTask::new(c)?),
            TaskKind::LinearQueries => Box::new(linear::LinearTask::new(c)?),
            TaskKind::Train => Box::new(train::TrainTask::new(c)?),
        }
    }};
}

/// The task a config describes (on the server and on every device alike).
pub fn build(config: &CollectionConfig) -> Result<Box<dyn Task>> {
    Ok(construct!(config))
}

/// The device's side of the task a config describes: the same object as [`build`]'s, seen only
/// as a [`DeviceSide`](crate::erased::DeviceSide) (the browser SDK: no server code linked).
pub fn build_device(config: &CollectionConfig) -> Result<Box<dyn crate::erased::DeviceSide>> {
    Ok(construct!(config))
}

/// The code length in bits of a task whose devices send integer item ids (heavy hitters with
/// `items = "id"`: codes 0 … 2^bits − 2 are ids, 2^bits − 1 pads); `None` for every other task.
pub fn id_code_bits(task: &TaskSpec) -> Option<u32> {
    match task {
        TaskSpec::HeavyHitters(h) if h.items == harmony_protocol::spec::ItemEncoding::Id => {
            Some(h.bits.unwrap_or(heavy::DEFAULT_BITS))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use harmony_core::wire::{ReportKind, WireKind, WireReport};

    /// Every report type that travels on the wire, by owner: harmony-core's (the frequency
    /// oracles' from their registry), harmony-learn's, then harmony-analytics' ranges and linear
    /// queries (20–29) and heavy hitters and marginals (30–39).
    fn all_kinds() -> (Vec<WireKind>, [std::ops::Range<usize>; 2]) {
        use ReportKind::*;
        let mut kinds: Vec<WireKind> = [Numeric, HarmonyBit, DuchiMulti, Record].iter().map(|k| k.wire()).collect();
        kinds.extend_from_slice(harmony_core::frequency::REPORT_KINDS);
        kinds.push(harmony_learn::remote::GradientReport::KIND);
        let ranges = kinds.len();
        kinds.extend([
            harmony_analytics::range::HhReport::KIND,
            harmony_analytics::range::HaarReport::KIND,
            harmony_analytics::linear::GaussianReport::KIND,
            harmony_analytics::linear::QueryBitReport::KIND,
        ]);
        let heavy = kinds.len();
        kinds.extend([
            harmony_analytics::heavy::HeavyHitterReport::KIND,
            harmony_analytics::heavy::SketchReport::KIND,
            harmony_analytics::marginals::groups::GroupReport::KIND,
            harmony_analytics::marginals::fourier::FourierReport::KIND,
        ]);
        let end = kinds.len();
        (kinds, [ranges..heavy, heavy..end])
    }

    /// No two report types share a kind byte or a name, each crate stays in its bytes, and
    /// every task's reports are registered kinds.
    #[test]
    fn report_kinds_are_unique_and_registered() {
        let (kinds, [ranges, heavy]) = all_kinds();
        for k in harmony_core::frequency::REPORT_KINDS {
            assert!((1..=19).contains(&k.byte) && k.byte != 12, "{k:?}: harmony-core owns bytes 1–11 and 13–19");
        }
        for (i, a) in kinds.iter().enumerate() {
            for b in &kinds[i + 1..] {
                assert!(a.byte != b.byte && a.name != b.name, "{a:?} and {b:?} collide");
            }
        }
        for k in &kinds[ranges] {
            assert!((20..=29).contains(&k.byte), "{k:?}: ranges and linear queries own bytes 20–29");
        }
        for k in &kinds[heavy] {
            assert!((30..=39).contains(&k.byte), "{k:?}: heavy hitters and marginals own bytes 30–39");
        }
        for k in crate::range::REPORT_KINDS.iter().chain(&crate::linear::REPORT_KINDS) {
            assert!(kinds.contains(k), "{k:?} is not a registered kind");
        }
    }
}
