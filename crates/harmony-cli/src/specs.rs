//! Task options → the task's spec: what `harmony simulate --task X` and `harmony collection
//! create --task X` both build, so a served collection runs exactly what a simulation ran.

use crate::data::SchemaFile;
use crate::simulate_tasks::{Task, TaskArgs};
use anyhow::{Result, anyhow, bail};
use clap::Args;
use harmony_core::kinds::{OracleKind, RecordNumeric};
use harmony_core::schema::Schema;
use harmony_core::strategy::{KChoice, StrategyKind};
use harmony_protocol::spec::{FrequencySpec, MeansSpec, TaskSpec};

/// The record-strategy options (`means`), and the oracle of `frequency`.
#[derive(Args, Debug, Clone, Default)]
pub struct MeansArgs {
    /// Strategies: split, harmony, sample-k (simulate: comma-separated, default the schema's,
    /// else all three; collection create: one, default harmony).
    #[arg(long, value_delimiter = ',')]
    pub strategy: Option<Vec<String>>,
    /// Numeric mechanism (split: laplace|scdf|staircase|duchi|pm|hm|duchi-multi; sample-k: pm|hm).
    #[arg(long)]
    pub numeric_mechanism: Option<String>,
    /// Categorical frequency oracle (means: split or sample-k; frequency: the oracle).
    #[arg(long)]
    pub categorical_mechanism: Option<String>,
    /// k for sample-k: `optimal` (closed-form argmin), `paper` (⌊ε/2.5⌋) or a number.
    /// For `--task marginals`: the marginal order, 2 or 3 (`optimal`, the default, runs both).
    #[arg(long, default_value = "optimal")]
    pub k: String,
}

/// `--k` as a [`KChoice`].
pub fn parse_k(s: &str) -> Result<KChoice> {
    Ok(match s {
        "optimal" => KChoice::Optimal,
        "paper" => KChoice::Paper,
        n => match n.parse::<usize>() {
            Ok(k) if k >= 1 => KChoice::Fixed(k),
            _ => bail!("--k is \"{n}\", expected optimal, paper or a positive integer"),
        },
    })
}

/// The strategies asked (`--strategy`, else the schema file's, else all three).
pub fn strategies(m: &MeansArgs, file: &SchemaFile) -> Result<Vec<StrategyKind>> {
    let names = m
        .strategy
        .clone()
        .or(file.strategies.clone())
        .unwrap_or(StrategyKind::NAMES.iter().map(|s| s.to_string()).collect());
    Ok(names.iter().map(|s| StrategyKind::parse(s)).collect::<Result<_, _>>()?)
}

/// The means spec of one strategy: the options given (or the schema file's), for the strategies
/// that take them (harmony's mechanisms are fixed).
pub fn means(m: &MeansArgs, file: &SchemaFile, strategy: StrategyKind) -> Result<MeansSpec> {
    let fixed = strategy == StrategyKind::Harmony;
    let num = m.numeric_mechanism.clone().or(file.numeric_mechanism.clone()).filter(|_| !fixed);
    let cat = m.categorical_mechanism.clone().or(file.categorical_mechanism.clone()).filter(|_| !fixed);
    Ok(MeansSpec {
        strategy,
        numeric_mechanism: num
            .map(|n| n.parse::<RecordNumeric>())
            .transpose()
            .map_err(|e| anyhow!("--numeric-mechanism: {e}"))?,
        categorical_mechanism: cat
            .map(|n| n.parse::<OracleKind>())
            .transpose()
            .map_err(|e| anyhow!("--categorical-mechanism: {e}"))?,
        k: Some(parse_k(&m.k)?),
    })
}

/// The frequency spec: `--column` (a categorical attribute) and `--categorical-mechanism`.
pub fn frequency(t: &TaskArgs, m: &MeansArgs) -> Result<FrequencySpec> {
    let attribute = t
        .column
        .clone()
        .ok_or_else(|| anyhow!("--column is missing: --task frequency needs the categorical attribute to estimate"))?;
    let mechanism = m
        .categorical_mechanism
        .as_deref()
        .map(|n| n.parse::<OracleKind>())
        .transpose()
        .map_err(|e| anyhow!("--categorical-mechanism: {e}"))?;
    Ok(FrequencySpec { attribute, mechanism })
}

/// The one spec `harmony collection create` sends (one strategy / method), with the schema the
/// task reads.
pub fn single(t: &TaskArgs, m: &MeansArgs, file: &SchemaFile, epsilon: f64) -> Result<(Option<Schema>, TaskSpec)> {
    let schema = Some(file.schema()?);
    if t.task != Task::Train {
        t.train.check_unused()?;
    }
    let spec = match t.task {
        Task::Means => {
            let kinds = match &m.strategy {
                None => vec![StrategyKind::Harmony],
                Some(_) => strategies(m, file)?,
            };
            let [kind] = kinds[..] else {
                bail!("--strategy has {} values, expected one for a collection", kinds.len())
            };
            TaskSpec::Means(means(m, file, kind)?)
        }
        Task::Frequency => TaskSpec::Frequency(frequency(t, m)?),
        Task::Train => {
            let s = schema.as_ref().expect("a schema file");
            TaskSpec::Train(crate::server_cmds::rounds::train_spec(s, epsilon, &t.train)?)
        }
        other => bail!("--task {} cannot be served by this build yet", other.name()),
    };
    Ok((schema, spec))
}
