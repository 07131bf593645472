//! Task options → the task's spec: what `harmony simulate --task X` and `harmony collection
//! create --task X` both build, so a served collection runs exactly what a simulation ran.

use crate::data::SchemaFile;
use crate::simulate_tasks::{CliTask, SpecArgs, TaskArgs};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use harmony_core::kinds::{OracleKind, RecordNumeric};
use harmony_core::schema::Schema;
use harmony_core::strategy::{KChoice, StrategyKind};
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{
    FrequencySpec, HeavyHittersSpec, HeavyMethod, Hull, ItemEncoding, LinearMechanism, LinearQueriesSpec,
    MarginalsMethod, MarginalsPost, MarginalsSpec, MeansSpec, RangeMethod, RangeSpec, TaskSpec,
};
use std::path::Path;

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
/// task reads (`file`; only heavy-hitters takes none): the task's own [`CliTask::spec`].
pub fn single(
    t: &TaskArgs,
    m: &MeansArgs,
    file: Option<&SchemaFile>,
    epsilon: f64,
) -> Result<(Option<Schema>, TaskSpec)> {
    let schema = file.map(SchemaFile::schema).transpose()?;
    let cli = t.task.cli();
    t.train.check_unused_except(cli.options)?;
    let spec = (cli.spec)(&SpecArgs { task: t, means: m, file, epsilon })?;
    if t.ranges.is_some() || t.quantiles.is_some() || t.rects.is_some() {
        bail!("--ranges, --quantiles and --rects are asked at query time: pass them to `harmony query`");
    }
    Ok((schema, spec))
}

/// `--method` of `range`/`quantiles`: hh, haar, flat (comma-separated; simulate's default all
/// three, a collection's hh).
pub fn range_methods(t: &TaskArgs) -> Result<Vec<RangeMethod>> {
    let Some(names) = &t.method else {
        return Ok(vec![RangeMethod::Hh, RangeMethod::Haar, RangeMethod::Flat]);
    };
    names
        .iter()
        .map(|m| match m.trim() {
            "hh" => Ok(RangeMethod::Hh),
            "haar" => Ok(RangeMethod::Haar),
            "flat" => Ok(RangeMethod::Flat),
            other => bail!("--method has \"{other}\", expected hh, haar or flat"),
        })
        .collect()
}

/// The range spec of one method: `--column` (a numeric attribute), `--bins` (else the schema
/// file's `[bins]`, else the task's default), `--branching` (`hh` only; ignored by the others).
pub fn range(t: &TaskArgs, file: &SchemaFile, method: RangeMethod) -> Result<RangeSpec> {
    let name = t
        .column
        .clone()
        .ok_or_else(|| anyhow!("--column is missing: --task range/quantiles needs the ordered column to analyse"))?;
    let attr = file.attributes.iter().find(|a| a.name() == name).ok_or_else(|| {
        let names: Vec<&str> = file.attributes.iter().map(|a| a.name()).collect();
        anyhow!("--column is \"{name}\", expected one of the schema's attributes: {}", names.join(", "))
    })?;
    if !attr.is_numeric() {
        bail!(
            "--column \"{name}\" is categorical ({} unordered labels); range and quantile queries need an ordered (numeric) column",
            attr.cardinality()
        );
    }
    let bins = t.bins.or(file.bins.get(&name).copied()).or_else(|| integer_bins(attr));
    if let Some(d) = bins.filter(|&d| d < 2) {
        bail!("--bins is {d}, expected an integer >= 2");
    }
    let branching = t.branching.filter(|_| method == RangeMethod::Hh);
    Ok(RangeSpec { attribute: name, bins, method, branching })
}

/// Most bins chosen for an attribute with integer bounds (one per integer; wider ones keep the
/// task's default).
const MAX_INTEGER_BINS: f64 = 256.0;

/// One bin per integer when the attribute's bounds are integers at most
/// [`MAX_INTEGER_BINS`] apart: the bin edges fall on integers (ages 17, 18, …, not 22.7031).
fn integer_bins(attr: &harmony_core::schema::Declared) -> Option<usize> {
    match &attr.attribute {
        harmony_core::schema::Attribute::Numeric { min, max, .. }
            if min.fract() == 0.0 && max.fract() == 0.0 && (2.0..=MAX_INTEGER_BINS).contains(&(max - min)) =>
        {
            Some((max - min) as usize)
        }
        _ => None,
    }
}

/// The query of `--ranges` (`LO:HI` in the attribute's units), `--quantiles` and `--rects`
/// (`X1:X2:Y1:Y2`), as `harmony query` takes them.
pub fn range_query(ranges: Option<&[String]>, quantiles: Option<&[f64]>, rects: Option<&[String]>) -> Result<Query> {
    let mut parts = Vec::new();
    if let Some(r) = ranges {
        parts.push(format!("ranges={}", r.join(",")));
    }
    if let Some(q) = quantiles {
        let q: Vec<String> = q.iter().map(|x| x.to_string()).collect();
        parts.push(format!("quantiles={}", q.join(",")));
    }
    if let Some(r) = rects {
        parts.push(format!("rects={}", r.join(",")));
    }
    Query::parse(&parts.join("&")).map_err(|(field, message)| anyhow!("invalid option: --{field}: {message}"))
}

/// `--method` of `linear-queries`: gaussian, hr, adaptive, adaptive-rounds (comma-separated;
/// simulate's default the first three, a collection's hr; adaptive-rounds is a collection's only:
/// its queries are chosen between rounds by the analyst, `harmony collection ask`).
pub fn linear_mechanisms(t: &TaskArgs) -> Result<Vec<LinearMechanism>> {
    use LinearMechanism::{Adaptive, AdaptiveRounds, Gaussian, Hr};
    let Some(names) = &t.method else { return Ok(vec![Gaussian, Hr, Adaptive]) };
    names
        .iter()
        .map(|m| {
            [Gaussian, Hr, Adaptive, AdaptiveRounds].into_iter().find(|x| x.name().eq_ignore_ascii_case(m.trim())).ok_or_else(|| {
                anyhow!("--method \"{m}\" is not a linear-queries method, expected one of gaussian, hr, adaptive, adaptive-rounds (collections only)")
            })
        })
        .collect()
}

/// The heavy-hitters specs, one per `--method` (pem, treehist, sketch; default pem), with their labels.
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
                "sketch" => HeavyMethod::Sketch,
                _ => bail!("--method \"{m}\" is not a heavy-hitters method, expected pem, treehist or sketch"),
            };
            let spec = HeavyHittersSpec {
                method,
                top: t.top,
                bits: t.item_bits,
                items,
                pad_length: t.pad_length,
                levels: None,
                rows: None,
                columns: None,
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
/// orders of `--k`, `--calm-l` and `--devices`.
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
        users: t.train.devices.filter(|_| calm),
        sets: None,
    })
}

/// `--queries` as the spec's inline workload: a built-in name, a JSON file's document or a CSV
/// file's text; with the attributes a JSON workload names.
fn workload(queries: &str) -> Result<(serde_json::Value, Option<Vec<String>>)> {
    use harmony_analytics::linear::Workload;
    if Workload::is_builtin(queries) {
        return Ok((serde_json::Value::String(queries.to_string()), None));
    }
    let text = std::fs::read_to_string(queries).with_context(|| {
        format!("--queries {queries}: not a built-in workload (identity, prefix) and not a readable file")
    })?;
    let json = Path::new(queries).extension().is_some_and(|e| e.eq_ignore_ascii_case("json"))
        || text.trim_start().starts_with(['{', '[']);
    if !json {
        return Ok((serde_json::Value::String(text), None));
    }
    let attrs = Workload::json_attributes(&text).with_context(|| format!("--queries {queries}"))?;
    let value = serde_json::from_str(&text).with_context(|| format!("--queries {queries}: not valid JSON"))?;
    Ok((value, attrs))
}

/// The domain attributes: `--attributes`, else the workload's, else the categorical attribute
/// with the most labels; each numeric one must have `[bins]` in the schema file.
fn linear_attributes(t: &TaskArgs, file: &SchemaFile, from_workload: Option<Vec<String>>) -> Result<Vec<String>> {
    let names = match t.attributes.clone().or(from_workload) {
        Some(n) if n.is_empty() => bail!("--attributes is empty, expected at least one attribute name"),
        Some(n) => n,
        None => {
            let best = file.attributes.iter().filter(|a| !a.is_numeric()).max_by_key(|a| a.cardinality()).ok_or_else(
                || anyhow!("the schema has no categorical attribute: pass --attributes (numeric ones need [bins])"),
            )?;
            eprintln!(
                "note: no --attributes given; using the categorical attribute with the most labels: {} ({} labels)",
                best.name(),
                best.cardinality()
            );
            vec![best.name().to_string()]
        }
    };
    for name in &names {
        let Some(a) = file.attributes.iter().find(|a| a.name() == name) else {
            let all: Vec<&str> = file.attributes.iter().map(|a| a.name()).collect();
            bail!("--attributes: unknown attribute \"{name}\", expected one of the schema's: {}", all.join(", "));
        };
        if a.is_numeric() && !file.bins.contains_key(name) {
            bail!(
                "--attributes: \"{name}\" is numeric and the schema has no bins for it; add `[bins]` with `{name} = 8` \
                 (equal-width bins over [min, max]) to the schema, or choose a categorical attribute"
            );
        }
    }
    Ok(names)
}

/// The linear-queries spec of one mechanism: `--attributes`, the schema file's `[bins]` of the
/// numeric ones, `--queries` (default `identity`), `--delta` and `--hull` (`gaussian` only;
/// ignored by the others).
pub fn linear(t: &TaskArgs, file: &SchemaFile, mechanism: LinearMechanism) -> Result<LinearQueriesSpec> {
    let (workload, from_workload) = workload(t.queries.as_deref().unwrap_or("identity"))?;
    let attributes = linear_attributes(t, file, from_workload)?;
    let bins = attributes
        .iter()
        .filter(|n| file.attributes.iter().any(|a| a.name() == n.as_str() && a.is_numeric()))
        .map(|n| (n.clone(), file.bins[n]))
        .collect();
    let spec = LinearQueriesSpec {
        attributes,
        bins,
        workload,
        mechanism,
        delta: None,
        hull: Hull::default(),
        enrollment: None,
        batch_size: None,
    };
    with_mechanism(t, &spec, mechanism)
}

/// `spec` (domain and workload) with another mechanism and its options (`--delta`, `--hull`:
/// `gaussian` only).
pub fn with_mechanism(t: &TaskArgs, spec: &LinearQueriesSpec, mechanism: LinearMechanism) -> Result<LinearQueriesSpec> {
    let gaussian = mechanism == LinearMechanism::Gaussian;
    if let Some(delta) = t.delta
        && !(delta > 0.0 && delta < 1.0)
    {
        bail!("--delta is {delta}, expected a number in (0, 1) (the δ of the Gaussian mechanism's (ε, δ)-LDP)");
    }
    let hull = match t.hull.as_deref().map(str::trim) {
        None | Some("symmetric") => Hull::Symmetric,
        Some("simplex") => Hull::Simplex,
        Some(other) => bail!("--hull is \"{other}\", expected symmetric (conv{{±a_v}}) or simplex (conv{{a_v}})"),
    };
    Ok(LinearQueriesSpec {
        mechanism,
        delta: t.delta.filter(|_| gaussian),
        hull: if gaussian { hull } else { Hull::default() },
        ..spec.clone()
    })
}

/// The `means` task on the command line (its simulation is `simulate::run_means`).
pub const MEANS: CliTask = CliTask {
    name: "means",
    about: "per-attribute means and frequencies of whole records (the default)",
    options: &["strategy", "numeric_mechanism", "categorical_mechanism", "k", "poison", "attack", "poison_target"],
    help: &[],
    not_taken: &[],
    simulate_examples: "# Every attribute's mean or frequencies, sample-k with HM, at two budgets:
harmony simulate means --strategy sample-k --numeric-mechanism hm --epsilon 1,2 --runs 2
# The split strategy with OUE for every categorical attribute:
harmony simulate means --strategy split --categorical-mechanism oue --epsilon 2 --runs 2",
    create_examples: "# Every attribute, the harmony strategy (the default), ε = 2:
harmony collection create means --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 2
# Sample-k with HM, named:
harmony collection create means --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 2 --strategy sample-k --numeric-mechanism hm --name 'Adult, sample-k'",
    spec: means_spec,
    simulate: crate::simulate::run_means,
    demo: None,
};

/// A means collection's spec: one strategy (`--strategy`, default harmony) and its mechanisms.
fn means_spec(a: &SpecArgs<'_>) -> Result<TaskSpec> {
    let file = a.file()?;
    let kinds = match &a.means.strategy {
        None => vec![StrategyKind::Harmony],
        Some(_) => strategies(a.means, file)?,
    };
    let [kind] = kinds[..] else { bail!("--strategy has {} values, expected one for a collection", kinds.len()) };
    Ok(means(a.means, file, kind)?.into())
}

#[cfg(test)]
mod range_linear_tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        t: TaskArgs,
        #[command(flatten)]
        m: MeansArgs,
    }

    /// `collection create`'s spec for the task options `args` on Adult's schema.
    fn single_of(args: &[&str]) -> Result<TaskSpec> {
        let w = Wrap::try_parse_from(std::iter::once("create").chain(args.iter().copied()))?;
        let file = SchemaFile::load(&crate::data::bundled("examples/adult.toml"))?;
        Ok(single(&w.t, &w.m, Some(&file), 1.0)?.1)
    }

    #[test]
    fn collections_take_one_method_and_no_query_options() {
        let TaskSpec::Range(r) = single_of(&["--task", "range", "--column", "age"]).unwrap() else { panic!() };
        assert_eq!((r.method, r.branching), (RangeMethod::Hh, None), "the server resolves the rest");
        let TaskSpec::Range(r) =
            single_of(&["--task", "range", "--column", "age", "--method", "haar", "--branching", "4"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((r.method, r.branching), (RangeMethod::Haar, None), "branching is hh's");
        let e = single_of(&["--task", "range", "--column", "age", "--method", "hh,flat"]).unwrap_err().to_string();
        assert!(e.contains("--method has 2 values"), "{e}");
        let e = single_of(&["--task", "range", "--column", "age", "--ranges", "20:30"]).unwrap_err().to_string();
        assert!(e.contains("asked at query time"), "{e}");
        let TaskSpec::LinearQueries(l) = single_of(&["--task", "linear-queries", "--queries", "prefix"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((l.mechanism, l.attributes.clone()), (LinearMechanism::Hr, vec!["native_country".to_string()]));
        assert_eq!(l.workload, serde_json::json!("prefix"));
        let queries = crate::data::bundled("examples/queries/adult_sex_race.json").display().to_string();
        let TaskSpec::LinearQueries(l) =
            single_of(&["--task", "linear-queries", "--method", "gaussian", "--queries", &queries, "--delta", "1e-5"])
                .unwrap()
        else {
            panic!()
        };
        assert_eq!((l.delta, l.attributes.len()), (Some(1e-5), 2), "the workload names its attributes");
        assert!(l.workload.is_object(), "a JSON workload travels inline");
    }

    /// Adult's age is declared on [17, 90]: one bin per year, so every edge is an integer; an
    /// explicit `--bins` still wins.
    #[test]
    fn integer_bounds_bin_on_integer_edges() {
        let TaskSpec::Range(r) = single_of(&["--task", "range", "--column", "age"]).unwrap() else { panic!() };
        assert_eq!(r.bins, Some(73));
        let TaskSpec::Range(r) = single_of(&["--task", "range", "--column", "age", "--bins", "8"]).unwrap() else {
            panic!()
        };
        assert_eq!(r.bins, Some(8));
        let TaskSpec::Range(r) = single_of(&["--task", "range", "--column", "fnlwgt"]).unwrap() else { panic!() };
        assert_eq!(r.bins, Some(4), "the schema's [bins]");
    }
}
