//! `harmony train`: linear regression, logistic regression or SVM trained under LDP, scored by
//! k-fold cross-validation × repeats against the non-private model and the trivial predictor.

use crate::output::{Format, progress};
use anyhow::{Context, Result, bail};
use clap::Args;
use harmony_learn::cv::{CvResult, Design, Experiment, Method, Projection, RunSpec};
use harmony_learn::features::{Encoding, FeatureMap, TargetSpec, Task, Threshold};
use harmony_learn::loss::Loss;
use harmony_learn::mechanism::MechanismKind;
use harmony_learn::projection::{Scaling, check_projection};
use harmony_learn::trainer::{GRADIENT_SCALE, NOISE_KAPPA, Schedule, TrainConfig};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Options of `harmony train`.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// Data, one device per row: CSV, .csv.xz, Parquet or Arrow IPC (detected; `-` = stdin). Default: data/adult.csv.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Schema (TOML). Default: examples/adult.toml for the bundled data, else inferred.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// The target column (every other schema attribute is a feature).
    #[arg(long)]
    pub target: String,
    /// linear (squared loss, numeric target), logistic or svm (binary target).
    #[arg(long)]
    pub task: String,
    /// Classification of a categorical target: the label that is the positive class (default:
    /// the second of a two-label column).
    #[arg(long)]
    pub positive: Option<String>,
    /// Classification of a numeric target: positive when above this value, or `mean`.
    #[arg(long, allow_hyphen_values = true)]
    pub threshold: Option<String>,
    /// Privacy budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,2,4", allow_negative_numbers = true)]
    pub epsilon: Vec<f64>,
    /// Designs, comma-separated: hm, pm, harmony-1bit, duchi-multi, laplace (the papers' SGD),
    /// hm-attr, hm-ss (extras); also non-private (exact gradients, 5 passes, this schedule: with
    /// --projection, what the projected features can represent). Default: all private designs
    /// (hm-ss only for linear).
    #[arg(long, value_delimiter = ',')]
    pub mechanism: Option<Vec<String>>,
    /// Random projection dimensions (MGD-DR), comma-separated; `none` (or 0) = no projection. Default:
    /// none,20 for linear, none otherwise.
    #[arg(long, value_delimiter = ',')]
    pub projection: Option<Vec<String>>,
    /// Projection entries: norm (±1/√r, intercept kept out of the projection) or cube (±1/L,
    /// Harmony's). Default: norm with --schedule noise, cube with --schedule papers.
    #[arg(long)]
    pub projection_scaling: Option<String>,
    /// Step sizes: noise (a constant step set from ε, the mechanism's variance, the batch and the
    /// schema's bound on ‖x‖², tail-averaged iterates; docs/LEARN.md) or papers (γ₀/√t, last
    /// iterate, gradients not scaled, Harmony's projection).
    #[arg(long, default_value = "noise")]
    pub schedule: String,
    /// κ of the noise schedule (γ = min(1, κ/(σ_b√T))/(βR²)).
    #[arg(long, default_value_t = NOISE_KAPPA, allow_negative_numbers = true)]
    pub kappa: f64,
    /// Gradients are multiplied by this before clipping to [-1, 1] (and the mean divided by it).
    /// Default: 2 with --schedule noise, 1 with --schedule papers.
    #[arg(long, allow_negative_numbers = true)]
    pub gradient_scale: Option<f64>,
    /// Categorical columns: zero-one (Wang et al.) or plus-minus (Harmony).
    #[arg(long, default_value = "zero-one")]
    pub encoding: String,
    /// L2 regularisation λ.
    #[arg(long, default_value_t = 1e-4, allow_negative_numbers = true)]
    pub lambda: f64,
    /// --schedule papers: γ₀ of γ_t = γ₀/√t (default: 0.3 for logistic and svm, 0.05 for linear).
    #[arg(long, allow_negative_numbers = true)]
    pub learning_rate: Option<f64>,
    /// Users per batch of the private designs (default: the papers' max(2·d·ln d/ε², n/1000)).
    /// The non-private reference keeps its own (n/1000 users, 5 passes).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// k of k-fold cross-validation.
    #[arg(long, default_value_t = 10)]
    pub folds: usize,
    /// Repeats of the k-fold split.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Seed (every run's randomness derives from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also draw the metric against ε, one line per design, to this PNG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Inference only: categorical columns with more labels than this are left out.
    #[arg(long, default_value_t = 100)]
    pub max_categories: usize,
}

/// γ₀ grid of the non-private reference model.
const NON_PRIVATE_RATES: &[f64] = &[0.3, 1.0, 3.0];

#[derive(Serialize, Debug)]
struct NonPrivate {
    mean: f64,
    std: f64,
    /// The γ₀ of the grid that scored best.
    learning_rate: f64,
    /// Passes over the training users.
    epochs: usize,
}

#[derive(Serialize, Debug)]
struct Baseline {
    name: &'static str,
    mean: f64,
    std: f64,
}

#[derive(Serialize, Debug)]
struct ResultRow {
    epsilon: f64,
    mechanism: &'static str,
    metric: &'static str,
    mean: f64,
    std: f64,
    batch_size: usize,
    batches: usize,
    projection_dim: Option<usize>,
    /// The step: the constant γ (noise schedule) or γ₀ (papers); None (JSON null) for hm-ss,
    /// which takes no gradient step.
    step: Option<f64>,
    /// The fraction of the gap between the trivial predictor and the non-private model that
    /// this design closes, (trivial − mean)/(trivial − non-private): 1 matches the non-private
    /// model, 0 the trivial predictor, < 0 is worse than it. None when the non-private model is
    /// not better than the trivial predictor.
    gap_closed: Option<f64>,
    seconds: f64,
}

/// (trivial − mean)/(trivial − non-private), None unless the non-private model beats the trivial
/// predictor (lower is better for both metrics).
fn gap_closed(mean: f64, trivial: f64, non_private: f64) -> Option<f64> {
    let gap = trivial - non_private;
    (gap > 0.0).then(|| (trivial - mean) / gap)
}

#[derive(Serialize, Debug)]
struct Output {
    task: &'static str,
    target: String,
    data: String,
    n: usize,
    d: usize,
    metric: &'static str,
    /// What the metric is measured on.
    metric_units: &'static str,
    positive: Option<String>,
    folds: usize,
    repeats: usize,
    seed: u64,
    encoding: String,
    lambda: f64,
    /// `noise` or `papers`.
    schedule: &'static str,
    /// κ (noise schedule).
    kappa: Option<f64>,
    /// γ₀ (papers schedule).
    learning_rate: Option<f64>,
    gradient_scale: f64,
    projection_scaling: &'static str,
    non_private: NonPrivate,
    baseline: Baseline,
    results: Vec<ResultRow>,
    seconds: f64,
}

/// A parameter error as an option error: `invalid option: --epsilon is 0.0, expected …`.
fn opt_err(e: harmony_core::Error) -> anyhow::Error {
    match e {
        harmony_core::Error::InvalidParameter { name, value, expected } => {
            anyhow::anyhow!("invalid option: --{name} is {value}, expected {expected}")
        }
        other => anyhow::anyhow!(other),
    }
}

/// The default γ₀ of a task.
pub fn default_learning_rate(task: Task) -> f64 {
    match task {
        Task::Linear => 0.05,
        Task::Logistic | Task::Svm => 0.3,
    }
}

/// Parses `--projection`: `none` or r with 1 ≤ r < the projected columns `cols` (d, or d − 1
/// when the intercept is kept out).
fn parse_projection(list: &[String], cols: usize) -> Result<Vec<Option<usize>>> {
    list.iter()
        .map(|s| {
            let s = s.trim();
            if s == "none" || s == "0" {
                return Ok(None);
            }
            let r: usize = s.parse().with_context(|| {
                format!(
                    "--projection is \"{s}\", expected `none` or an integer in [1, {}] (fewer than the {cols} projected columns)",
                    cols - 1
                )
            })?;
            check_projection(r, cols).map_err(opt_err)?;
            Ok(Some(r))
        })
        .collect()
}

/// Runs `harmony train`.
pub fn run(args: TrainArgs) -> Result<()> {
    let out = compute(&args)?;
    crate::output::emit(&out, args.format, args.plot.as_deref(), write_plot, print_table)
}

/// The options of `harmony train`, checked.
struct Options {
    task: Task,
    encoding: Encoding,
    designs: Vec<Design>,
    threshold: Option<Threshold>,
    papers: bool,
    config: TrainConfig,
    scaling: Scaling,
}

fn designs(args: &TrainArgs, task: Task) -> Result<Vec<Design>> {
    Ok(match &args.mechanism {
        Some(names) => names.iter().map(|n| Design::parse(n.trim())).collect::<Result<_, _>>().map_err(opt_err)?,
        // hm-ss costs O(d²) per user and is a least-squares design: by default only for linear.
        None => Design::NAMES
            .iter()
            .filter(|&&n| task == Task::Linear || n != "hm-ss")
            .map(|n| Design::parse(n).expect("known"))
            .collect(),
    })
}

fn options(args: &TrainArgs) -> Result<Options> {
    let task = Task::parse(&args.task).map_err(opt_err)?;
    let encoding = Encoding::parse(&args.encoding).map_err(opt_err)?;
    for &e in &args.epsilon {
        harmony_core::Epsilon::new(e).map_err(opt_err)?;
    }
    if args.epsilon.is_empty() {
        bail!("--epsilon is empty, expected a comma-separated list of numbers > 0");
    }
    let threshold = match args.threshold.as_deref() {
        None => None,
        Some("mean") => Some(Threshold::Mean),
        Some(v) => Some(Threshold::Value(v.parse().with_context(|| {
            format!("--threshold is \"{v}\", expected a number (in the target's units) or `mean`")
        })?)),
    };
    let loss = Loss::for_task(task);
    let papers = match args.schedule.as_str() {
        "noise" => false,
        "papers" => true,
        other => bail!("invalid option: --schedule is \"{other}\", expected one of noise, papers"),
    };
    if !papers && args.learning_rate.is_some() {
        bail!(
            "invalid option: --learning-rate is for --schedule papers (γ₀/√t); the noise schedule sets its step from ε, the mechanism and the batch (tune it with --kappa)"
        );
    }
    let mut config = if papers {
        TrainConfig::new(loss, args.learning_rate.unwrap_or(default_learning_rate(task)))
    } else {
        TrainConfig { schedule: Schedule::Noise(args.kappa), ..TrainConfig::noise(loss, 1.0) }
    };
    config.lambda = args.lambda;
    config.batch_size = args.batch_size;
    config.gradient_scale = args.gradient_scale.unwrap_or(if papers { 1.0 } else { GRADIENT_SCALE });
    config.validate().map_err(opt_err)?;
    let scaling = match args.projection_scaling.as_deref() {
        Some(name) => Scaling::parse(name).map_err(opt_err)?,
        None if papers => Scaling::Cube,
        None => Scaling::Norm,
    };
    Ok(Options { task, encoding, designs: designs(args, task)?, threshold, papers, config, scaling })
}

/// The data as a feature dataset: (data name, schema, features, dataset).
fn load(
    args: &TrainArgs,
    o: &Options,
) -> Result<(String, harmony_core::schema::Schema, FeatureMap, harmony_learn::features::Dataset)> {
    let (data_name, file, enc) = crate::simulate::load_inputs(&args.data, &args.schema, args.max_categories)?;
    let schema = file.schema()?;
    if enc.skipped > 0 || enc.clamped > 0 {
        eprintln!("note: invalid-value policy: {} rows skipped, {} values clamped", enc.skipped, enc.clamped);
    }
    let spec = TargetSpec { column: args.target.clone(), positive: args.positive.clone(), threshold: o.threshold };
    let features = FeatureMap::new(&schema, o.task, o.encoding, &spec, &enc.values).map_err(opt_err)?;
    let dataset = features.dataset(&enc.values, schema.len())?;
    Ok((data_name, schema, features, dataset))
}

/// The projections to run (`--projection`, else r = 20 beside none for linear models with more
/// than 20 columns).
fn projections(args: &TrainArgs, o: &Options, d: usize) -> Result<Vec<Option<Projection>>> {
    // The norm scaling keeps the intercept (column 0) out of the projection.
    let keep_intercept = o.scaling == Scaling::Norm;
    let cols = d - keep_intercept as usize;
    let list = match &args.projection {
        Some(list) => parse_projection(list, cols)?,
        None if o.task == Task::Linear && cols > 20 => vec![None, Some(20)],
        None => vec![None],
    };
    Ok(list.into_iter().map(|r| r.map(|r| Projection { r, scaling: o.scaling, keep_intercept })).collect())
}

/// The non-private reference: γ₀ picked from a small grid on the first repeat's folds (the
/// held-out folds: this can only make the reference stronger and the private designs' gap
/// larger), then cross-validated like every design. It always uses the papers' schedule (5
/// epochs) and its own batch (n/1000 over 5 passes), whatever --batch-size the private designs
/// use: a larger batch would only weaken the reference and flatter every design's gap.
fn non_private(exp: &Experiment, loss: Loss, lambda: f64, tick: &(dyn Fn() + Sync)) -> Result<(CvResult, f64)> {
    let np_config = TrainConfig { lambda, ..TrainConfig::new(loss, 1.0) };
    let np_spec = RunSpec {
        method: Method::Sgd,
        mechanism: MechanismKind::NonPrivate,
        epsilon: None,
        projection: None,
        config: np_config,
        stream: 0,
    };
    let mut best: Option<(f64, f64)> = None;
    let grid_exp = Experiment { repeats: 1, ..*exp };
    for &lr in NON_PRIVATE_RATES {
        let spec = RunSpec { config: TrainConfig { schedule: Schedule::Decay(lr), ..np_config }, ..np_spec };
        let r = grid_exp.run(&spec, tick)?;
        if best.is_none_or(|(m, _)| r.mean < m) {
            best = Some((r.mean, lr));
        }
    }
    let rate = best.expect("non-empty grid").1;
    let res =
        exp.run(&RunSpec { config: TrainConfig { schedule: Schedule::Decay(rate), ..np_config }, ..np_spec }, tick)?;
    Ok((res, rate))
}

/// The positive class's description (classification).
fn positive_label(
    args: &TrainArgs,
    task: Task,
    schema: &harmony_core::schema::Schema,
    features: &FeatureMap,
) -> Option<String> {
    match schema.attributes()[features.target_index()] {
        harmony_core::schema::Attribute::Categorical { ref categories, .. } if task.is_classification() => {
            Some(args.positive.clone().unwrap_or_else(|| categories[1].clone()))
        }
        _ if task.is_classification() => {
            Some(format!("{} > {}", args.target, args.threshold.clone().unwrap_or_default()))
        }
        _ => None,
    }
}

/// Every (ε, design, projection) of the grid, cross-validated.
fn grid(
    args: &TrainArgs,
    o: &Options,
    exp: &Experiment,
    projections: &[Option<Projection>],
    metric: &'static str,
    tick: &(dyn Fn() + Sync),
    gap: &dyn Fn(f64) -> Option<f64>,
) -> Result<Vec<ResultRow>> {
    let config = o.config;
    let mut results = Vec::new();
    for (ei, &eps) in args.epsilon.iter().enumerate() {
        for (di, design) in o.designs.iter().enumerate() {
            for (pi, &projection) in projections.iter().enumerate() {
                let spec = RunSpec {
                    method: design.method,
                    mechanism: design.mechanism,
                    epsilon: Some(eps),
                    projection,
                    config,
                    stream: 1 + ((ei as u64) << 16 | (di as u64) << 8 | pi as u64),
                };
                let t = Instant::now();
                let res: CvResult = exp
                    .run(&spec, tick)
                    .map_err(opt_err)
                    .with_context(|| format!("{} at epsilon {eps}", design.name))?;
                results.push(ResultRow {
                    epsilon: eps,
                    mechanism: design.name,
                    metric,
                    mean: res.mean,
                    std: res.std,
                    batch_size: res.batch_size,
                    batches: res.batches,
                    projection_dim: projection.map(|p| p.r),
                    step: res.step,
                    gap_closed: gap(res.mean),
                    seconds: t.elapsed().as_secs_f64(),
                });
            }
        }
    }
    Ok(results)
}

fn compute(args: &TrainArgs) -> Result<Output> {
    let start = Instant::now();
    let o = options(args)?;
    let (task, config) = (o.task, o.config);
    let (data_name, schema, features, dataset) = load(args, &o)?;
    let d = dataset.d;
    let projections = projections(args, &o, d)?;
    let blocks = features.block_lengths();
    let exp = Experiment {
        blocks: &blocks,
        data: &dataset,
        task,
        max_l1: features.max_l1(),
        intercept: true,
        folds: args.folds,
        repeats: args.repeats,
        seed: args.seed,
    };
    exp.validate().map_err(opt_err)?;
    let runs_per = (args.folds * args.repeats) as u64;
    let total = (1 + args.epsilon.len() * o.designs.len() * projections.len()) as u64 * runs_per
        + (NON_PRIVATE_RATES.len() * args.folds) as u64;
    let pb = progress(total, "train", args.format);
    let tick = || pb.inc(1);
    let (non_private, np_rate) = non_private(&exp, Loss::for_task(task), args.lambda, &tick)?;
    let baseline = exp.baseline()?;
    let metric = if task.is_classification() { "misclassification" } else { "mse" };
    let gap = |mean| gap_closed(mean, baseline.mean, non_private.mean);
    let results = grid(args, &o, &exp, &projections, metric, &tick, &gap)?;
    pb.finish_and_clear();
    let papers = o.papers;
    Ok(Output {
        task: task.name(),
        target: args.target.clone(),
        data: data_name,
        n: dataset.len(),
        d,
        metric,
        metric_units: if task.is_classification() {
            "fraction of held-out devices misclassified"
        } else {
            "mean squared error of held-out devices, target mapped to [-1, 1]"
        },
        positive: positive_label(args, task, &schema, &features),
        folds: args.folds,
        repeats: args.repeats,
        seed: args.seed,
        encoding: args.encoding.clone(),
        lambda: config.lambda,
        schedule: if papers { "papers" } else { "noise" },
        kappa: (!papers).then_some(args.kappa),
        learning_rate: match config.schedule {
            Schedule::Decay(g) => Some(g),
            Schedule::Noise(_) => None,
        },
        gradient_scale: config.gradient_scale,
        projection_scaling: match o.scaling {
            Scaling::Norm => "norm",
            Scaling::Cube => "cube",
        },
        non_private: NonPrivate {
            mean: non_private.mean,
            std: non_private.std,
            learning_rate: np_rate,
            epochs: harmony_learn::cv::NON_PRIVATE_EPOCHS,
        },
        baseline: Baseline {
            name: if task.is_classification() { "majority" } else { "mean" },
            mean: baseline.mean,
            std: baseline.std,
        },
        results,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn design_label(r: &ResultRow) -> String {
    match r.projection_dim {
        Some(p) => format!("{} (r = {p})", r.mechanism),
        None => r.mechanism.to_string(),
    }
}

fn print_table(out: &Output) {
    let what = match out.task {
        "linear" => "linear regression",
        "logistic" => "logistic regression",
        _ => "linear SVM",
    };
    println!(
        "harmony train: {what} of {} on {} — n = {} devices, d = {} features, {}-fold CV × {} repeats, seed {} ({:.1} s)",
        out.target, out.data, out.n, out.d, out.folds, out.repeats, out.seed, out.seconds
    );
    if let Some(p) = &out.positive {
        println!("positive class: {p}");
    }
    println!("metric: {} ({}); mean ± std over folds × repeats", out.metric, out.metric_units);
    match (out.kappa, out.learning_rate) {
        (Some(k), _) => println!(
            "schedule: noise (constant step from ε, κ = {k}, tail-averaged), gradient scale {}, projection {}",
            out.gradient_scale, out.projection_scaling
        ),
        (_, g) => println!(
            "schedule: papers (γ₀/√t, γ₀ = {}), gradient scale {}, projection {}",
            g.unwrap_or(f64::NAN),
            out.gradient_scale,
            out.projection_scaling
        ),
    }
    println!(
        "non-private: {:.4} ± {:.4} (γ₀ = {}, {} epochs)    {} predictor: {:.4} ± {:.4}",
        out.non_private.mean,
        out.non_private.std,
        out.non_private.learning_rate,
        out.non_private.epochs,
        out.baseline.name,
        out.baseline.mean,
        out.baseline.std
    );
    println!();
    println!(
        "{:>5}  {:<20} {:>8} {:>8} {:>6} {:>7} {:>8} {:>8} {:>7}",
        "eps", "design", "mean", "std", "gap", "batch", "batches", "step", "s"
    );
    for r in &out.results {
        // `+ 0.0` turns a rounded −0 into 0.
        let gap = r.gap_closed.map_or_else(|| "-".to_string(), |g| format!("{}%", (100.0 * g).round() + 0.0));
        println!(
            "{:>5}  {:<20} {:>8.4} {:>8.4} {:>6} {:>7} {:>8} {:>8} {:>7.2}",
            r.epsilon,
            design_label(r),
            r.mean,
            r.std,
            gap,
            r.batch_size,
            r.batches,
            r.step.map_or_else(|| "-".to_string(), |s| format!("{s:.4}")),
            r.seconds
        );
    }
    println!(
        "gap: (trivial − mean)/(trivial − non-private), the share of the way from the {} predictor to the non-private model",
        out.baseline.name
    );
}

/// The metric against ε, one line per design, with the non-private model and the trivial
/// predictor as flat lines (as Figs. 9–11 of Wang et al.).
fn write_plot(path: &std::path::Path, out: &Output) -> Result<()> {
    use crate::plot::{Panel, Series, YScale};
    let mut series: Vec<Series> = Vec::new();
    for r in &out.results {
        let label = design_label(r);
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((r.epsilon, r.mean)),
            None => series.push(Series { label, points: vec![(r.epsilon, r.mean)] }),
        }
    }
    let (lo, hi) =
        out.results.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| (a.min(r.epsilon), b.max(r.epsilon)));
    series.push(Series {
        label: "non-private".into(),
        points: vec![(lo, out.non_private.mean), (hi, out.non_private.mean)],
    });
    series.push(Series {
        label: format!("{} predictor", out.baseline.name),
        points: vec![(lo, out.baseline.mean), (hi, out.baseline.mean)],
    });
    let (y_label, scale) = if out.metric == "mse" {
        ("test MSE (target on [-1, 1])", YScale::Log)
    } else {
        ("misclassification rate", YScale::Linear)
    };
    let panel = Panel { title: format!("{} of {}", out.task, out.target), y_label: y_label.into(), series };
    let title = format!("{}: n = {}, d = {}, {}-fold CV × {}", out.data, out.n, out.d, out.folds, out.repeats);
    crate::plot::line_panels_png_scaled(path, &title, &[panel], scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: TrainArgs,
    }

    fn args(extra: &[&str]) -> TrainArgs {
        let mut v = vec!["train"];
        v.extend_from_slice(extra);
        Wrap::parse_from(v).args
    }

    /// The error of a run that must fail (small CV, so a wrongly accepted option costs little).
    fn err(extra: &[&str]) -> String {
        let mut v = extra.to_vec();
        v.extend_from_slice(&["--folds", "2", "--repeats", "1"]);
        format!("{:#}", compute(&args(&v)).expect_err("the options must be rejected"))
    }

    #[test]
    fn bad_options_name_the_option_and_valid_values() {
        let e = err(&["--target", "salary", "--task", "logistic"]);
        assert!(e.contains("target is \"salary\"") && e.contains("age, workclass"), "{e}");
        let e = err(&["--target", "age", "--task", "logistic"]);
        assert!(e.contains("--threshold"), "{e}");
        let e = err(&["--target", "workclass", "--task", "svm"]);
        assert!(e.contains("9 labels") && e.contains("--positive"), "{e}");
        let e = err(&["--target", "income", "--task", "logistic", "--epsilon", "0"]);
        assert!(e.contains("--epsilon is 0.0") && e.contains(">= 0.002"), "{e}");
        let e = err(&["--target", "income", "--task", "logistic", "--epsilon", "NaN"]);
        assert!(e.contains("--epsilon is NaN"), "{e}");
        let e = err(&["--target", "income", "--task", "logistic", "--mechanism", "gauss"]);
        assert!(e.contains("--mechanism is \"gauss\"") && e.contains("hm, pm, harmony-1bit"), "{e}");
        // The default (norm) projection keeps the intercept out: 100 projectable columns.
        let e = err(&["--target", "hours_per_week", "--task", "linear", "--projection", "100"]);
        assert!(e.contains("--projection is 100") && e.contains("[1, 99]"), "{e}");
        let e = err(&["--target", "hours_per_week", "--task", "linear", "--schedule", "papers", "--projection", "101"]);
        assert!(e.contains("--projection is 101") && e.contains("[1, 100]"), "{e}");
        let e = err(&["--target", "income", "--task", "ridge"]);
        assert!(e.contains("--task is \"ridge\"") && e.contains("linear, logistic, svm"), "{e}");
        let e = err(&["--target", "income", "--task", "linear"]);
        assert!(e.contains("numeric columns: age"), "{e}");
        let e = err(&["--target", "income", "--task", "svm", "--schedule", "adam"]);
        assert!(e.contains("--schedule is \"adam\"") && e.contains("noise, papers"), "{e}");
        let e = err(&["--target", "income", "--task", "svm", "--learning-rate", "0.3"]);
        assert!(e.contains("--learning-rate") && e.contains("--schedule papers"), "{e}");
        let e = err(&["--target", "income", "--task", "svm", "--kappa", "0"]);
        assert!(e.contains("--kappa is 0"), "{e}");
        let e = err(&["--target", "income", "--task", "svm", "--gradient-scale", "0.5"]);
        assert!(e.contains("--gradient-scale is 0.5"), "{e}");
        let e = err(&["--target", "hours_per_week", "--task", "linear", "--projection-scaling", "jl"]);
        assert!(e.contains("--projection-scaling is \"jl\"") && e.contains("norm, cube"), "{e}");
        // Negative numbers reach the validation (clap would otherwise read them as flags).
        let e = err(&["--target", "income", "--task", "svm", "--lambda", "-1"]);
        assert!(e.contains("--lambda is -1") && e.contains(">= 0"), "{e}");
        let e = err(&["--target", "income", "--task", "svm", "--epsilon", "1,-2"]);
        assert!(e.contains("--epsilon is -2"), "{e}");
        let e = err(&["--target", "age", "--task", "logistic", "--threshold", "-5"]);
        assert!(e.contains("--threshold is -5") && e.contains("[17, 90)"), "{e}");
    }

    #[test]
    fn gap_closed_is_the_fraction_of_the_gap() {
        assert_eq!(gap_closed(0.2, 0.24, 0.16), Some((0.24 - 0.2) / (0.24 - 0.16)));
        assert_eq!(gap_closed(0.16, 0.24, 0.16), Some(1.0));
        assert!(gap_closed(0.3, 0.24, 0.16).unwrap() < 0.0);
        // A non-private model no better than the trivial predictor: no gap to close.
        assert_eq!(gap_closed(0.2, 0.24, 0.24), None);
        assert_eq!(gap_closed(0.2, 0.24, 0.25), None);
    }

    #[test]
    fn small_run_is_reproducible_and_has_the_json_fields() {
        let a = args(&[
            "--target",
            "income",
            "--task",
            "logistic",
            "--epsilon",
            "4",
            "--mechanism",
            "hm,hm-ss",
            "--folds",
            "2",
            "--repeats",
            "1",
        ]);
        let o1 = compute(&a).unwrap();
        let o2 = compute(&a).unwrap();
        assert_eq!(o1.results[0].mean, o2.results[0].mean);
        let v = serde_json::to_value(&o1).unwrap();
        for k in
            ["task", "target", "n", "d", "non_private", "baseline", "results", "schedule", "kappa", "gradient_scale"]
        {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v["baseline"]["name"], "majority");
        let r = &v["results"][0];
        for k in [
            "epsilon",
            "mechanism",
            "metric",
            "mean",
            "std",
            "batch_size",
            "batches",
            "projection_dim",
            "step",
            "gap_closed",
        ] {
            assert!(r.get(k).is_some(), "{k}");
        }
        for r in &o1.results {
            let want = (o1.baseline.mean - r.mean) / (o1.baseline.mean - o1.non_private.mean);
            assert!((r.gap_closed.unwrap() - want).abs() < 1e-12, "{r:?}");
        }
        assert_eq!(r["metric"], "misclassification");
        assert_eq!(v["schedule"], "noise");
        assert!(r["step"].as_f64().unwrap() > 0.0);
        // hm-ss takes no gradient step: its step is null, not 0.
        assert_eq!(v["results"][1]["mechanism"], "hm-ss");
        assert!(v["results"][1]["step"].is_null());
        // --batch-size is the private designs': the non-private reference keeps its own batch.
        let mut big = a.clone();
        big.batch_size = Some(5_000);
        let o3 = compute(&big).unwrap();
        assert_eq!(o3.non_private.mean, o1.non_private.mean);
        assert_eq!(o3.results[0].batch_size, 5_000);
        assert!(r["projection_dim"].is_null());
        assert_eq!((o1.n, o1.d), (48_842, 101));
    }

    /// Heavy tier (release, ~1 min): the acceptance orderings on Adult at ε = 4, 10-fold CV × 1,
    /// with the shipped defaults. Run with
    /// `cargo test --release -p harmony-cli -- --ignored adult_acceptance`.
    #[test]
    #[ignore]
    fn adult_acceptance() {
        let a = args(&[
            "--target",
            "income",
            "--task",
            "logistic",
            "--epsilon",
            "4",
            "--mechanism",
            "hm,pm,duchi-multi,laplace,hm-attr",
            "--repeats",
            "1",
        ]);
        let o = compute(&a).unwrap();
        let m = |name: &str| o.results.iter().find(|r| r.mechanism == name).unwrap().mean;
        let (maj, np) = (o.baseline.mean, o.non_private.mean);
        for paper in ["hm", "pm"] {
            for base in ["duchi-multi", "laplace"] {
                assert!(m(paper) < m(base), "{paper} {} vs {base} {}", m(paper), m(base));
            }
        }
        let closed = (maj - m("hm-attr")) / (maj - np);
        assert!(closed > 0.5, "hm-attr closes {closed:.2} of the gap ({} vs {maj} / {np})", m("hm-attr"));
        let a = args(&[
            "--target",
            "hours_per_week",
            "--task",
            "linear",
            "--epsilon",
            "1,2",
            "--mechanism",
            "harmony-1bit",
            "--repeats",
            "1",
        ]);
        let o = compute(&a).unwrap();
        for eps in [1.0, 2.0] {
            let at = |p: Option<usize>| {
                o.results.iter().find(|r| r.epsilon == eps && r.projection_dim == p).expect("row").mean
            };
            assert!(at(Some(20)) < at(None), "ε = {eps}: MGD-DR {} vs MGD {}", at(Some(20)), at(None));
        }
    }
}
