//! Task options → the task's spec: what `harmony simulate --task X` and `harmony collection
//! create --task X` both build, so a served collection runs exactly what a simulation ran.

use crate::data::SchemaFile;
use crate::simulate_tasks::{Task, TaskArgs};
use anyhow::{Result, anyhow, bail};
use clap::Args;
use harmony_core::kinds::{OracleKind, RecordNumeric};
use harmony_core::schema::Schema;
use harmony_core::strategy::{KChoice, StrategyKind};
use harmony_protocol::spec::{
    FrequencySpec, HeavyHittersSpec, HeavyMethod, ItemEncoding, MarginalsMethod, MarginalsPost, MarginalsSpec,
    MeansSpec, TaskSpec,
};

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
        let mut unused = t.train.clone();
        if t.task == Task::Marginals {
            unused.users = None; // CALM's expected devices
        }
        unused.check_unused()?;
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
        Task::HeavyHitters => {
            let [spec] = &heavy(t)?[..] else { bail!("--method has several values, expected one for a collection") };
            TaskSpec::HeavyHitters(spec.1.clone())
        }
        Task::Marginals => {
            let names = t.method.clone().unwrap_or(vec!["calm".into()]);
            let [name] = &names[..] else {
                bail!("--method has {} values, expected one for a collection", names.len())
            };
            TaskSpec::Marginals(marginals(t, m, file, name)?)
        }
        Task::Train => {
            let s = schema.as_ref().expect("a schema file");
            TaskSpec::Train(crate::server_cmds::rounds::train_spec(s, epsilon, &t.train)?)
        }
        other => bail!("--task {} cannot be served by this build yet", other.name()),
    };
    Ok((schema, spec))
}

/// The heavy-hitters specs, one per `--method` (pem, treehist; default pem), with their labels.
pub fn heavy(t: &TaskArgs) -> Result<Vec<(String, HeavyHittersSpec)>> {
    let items = match t.items.as_deref().unwrap_or("hash") {
        "hash" => ItemEncoding::Hash,
        "id" => ItemEncoding::Id,
        other => bail!("--items is \"{other}\", expected hash or id"),
    };
    if t.top == Some(0) {
        bail!("--top is 0, expected an integer >= 1");
    }
    let methods = t.method.clone().unwrap_or(vec!["pem".into()]);
    methods
        .iter()
        .map(|m| {
            let method = match m.as_str() {
                "pem" => HeavyMethod::Pem,
                "treehist" => HeavyMethod::Treehist,
                _ => bail!("--method \"{m}\" is not a heavy-hitters method, expected pem or treehist"),
            };
            let spec = HeavyHittersSpec {
                method,
                top: t.top,
                bits: t.item_bits,
                items,
                pad_length: t.pad_length,
                levels: None,
                candidates: Vec::new(),
            };
            Ok((m.clone(), spec))
        })
        .collect()
}

/// The marginals methods of `--method`: CALM with each post-processing, and the baselines.
pub const MARGINALS_METHODS: [&str; 7] =
    ["calm", "calm-family", "calm-local", "calm-gls", "calm-raw", "direct", "fourier"];

/// `--k` as the marginal orders: 2, 3, or both (`optimal`, the default).
pub fn marginal_orders(k: &str) -> Result<Vec<usize>> {
    Ok(match k {
        "optimal" => vec![2, 3],
        "2" => vec![2],
        "3" => vec![3],
        other => bail!("--k is \"{other}\", expected 2 or 3 for --task marginals (default: both)"),
    })
}

/// The marginals spec of one `--method` name: `--attributes`, the schema file's `[bins]`, the
/// orders of `--k`, `--calm-l` and `--users`.
pub fn marginals(t: &TaskArgs, m: &MeansArgs, file: &SchemaFile, method: &str) -> Result<MarginalsSpec> {
    let (method, post) = match method {
        "calm" => (MarginalsMethod::Calm, Some(MarginalsPost::Joint)),
        "calm-family" => (MarginalsMethod::Calm, Some(MarginalsPost::Family)),
        "calm-local" => (MarginalsMethod::Calm, Some(MarginalsPost::Local)),
        "calm-gls" => (MarginalsMethod::Calm, Some(MarginalsPost::Gls)),
        "calm-raw" => (MarginalsMethod::Calm, Some(MarginalsPost::Raw)),
        "direct" => (MarginalsMethod::Direct, None),
        "fourier" => (MarginalsMethod::Fourier, None),
        other => {
            bail!("--method {other:?} is not a marginals method, expected one of: {}", MARGINALS_METHODS.join(", "))
        }
    };
    let calm = method == MarginalsMethod::Calm;
    Ok(MarginalsSpec {
        attributes: t.attributes.clone(),
        bins: file.bins.clone(),
        ways: Some(marginal_orders(&m.k)?),
        method,
        post,
        l: t.calm_l.filter(|_| calm),
        users: t.train.users.filter(|_| calm),
        sets: None,
    })
}
