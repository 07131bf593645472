//! `harmony simulate`: every row of a CSV is one device; each randomizes its row through the
//! task a server would run for the same options (harmony-tasks: the `means` task's record
//! mechanism, device i with `device_rng(seed, i)`), the reports are aggregated, and the
//! estimates compared with the truth. Run 1 of every cell uses `--seed` itself, so `harmony
//! submit --simulate-devices --seed S` into a server gives the estimates of run 1 exactly.

use crate::data::{self, InvalidPolicy, SchemaFile};
use crate::output::{Format, progress};
use anyhow::{Context, Result, bail};
use clap::Args;
use harmony_core::estimate::{Moments, Z95};
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::schema::{Attribute, ColumnValues, Schema, Value};
use harmony_core::strategy::{AttributeEstimate, RecordAggregator, RecordMechanism};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, MeansEstimate};
use harmony_tasks::means::MeansTask;
use harmony_tasks::simulate::run_seed;
use harmony_tasks::{Input, Task, Typed};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Options of `harmony simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Data, one device per row: CSV, .csv.xz, Parquet or Arrow IPC (detected from the magic bytes,
    /// else the extension; `-` = stdin). Default: the bundled data/adult.csv.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Schema (TOML). Default: examples/adult.toml for the bundled data, else inferred.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Privacy budgets, comma-separated (default: the schema's, else 0.5,1,2,4).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub epsilon: Option<Vec<f64>>,
    /// The record strategies and mechanisms (`--task means`; `--categorical-mechanism` also for
    /// `--task frequency`).
    #[command(flatten)]
    pub means: crate::specs::MeansArgs,
    /// Independent runs (fresh randomness each).
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Seed of the simulation's fast RNG.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Inference only: categorical columns with more labels than this are left out.
    #[arg(long, default_value_t = 100)]
    pub max_categories: usize,
    /// Instead of a CSV, simulate this many synthetic devices with 16 attributes (8 numeric:
    /// truncated normals N(μ_j, 1/4) on [-1, 1]; 8 categorical: Zipf(1.1) over 4–32 labels).
    #[arg(long, conflicts_with_all = ["data", "schema"])]
    pub synthetic: Option<usize>,
    /// Also draw empirical MSE against ε, one line per strategy, to this PNG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// The analysis task and its options (`--task range|quantiles|heavy-hitters|marginals|linear-queries`).
    #[command(flatten)]
    pub task: crate::simulate_tasks::TaskArgs,
    /// Poisoning (`--poison`, `--attack`, `--poison-target`; docs/POISONING.md).
    #[command(flatten)]
    pub poison: crate::simulate_tasks::poison::PoisonArgs,
}

/// A seeded synthetic population: 8 numeric attributes (truncated N(μ_j, 0.25²) on [-1, 1], as
/// in Wang et al.'s synthetic data) and 8 categorical ones (Zipf(1.1) over 4·(j+1) labels).
fn synthetic(n: usize, seed: u64) -> Result<(SchemaFile, data::Encoded)> {
    use harmony_core::sampling::uniform01;
    if n == 0 {
        bail!("--synthetic is 0, expected a number of devices >= 1");
    }
    let mut attributes = Vec::new();
    for j in 0..8 {
        attributes.push(Attribute::Numeric { name: format!("num{j}"), min: -1.0, max: 1.0 });
    }
    let cards: Vec<usize> = (0..8).map(|j| 4 * (j + 1)).collect();
    for (j, &c) in cards.iter().enumerate() {
        attributes.push(Attribute::Categorical {
            name: format!("cat{j}"),
            categories: (0..c).map(|v| format!("c{v}")).collect(),
        });
    }
    // Zipf(1.1) cumulative tables.
    let cdfs: Vec<Vec<f64>> = cards
        .iter()
        .map(|&c| {
            let w: Vec<f64> = (1..=c).map(|r| (r as f64).powf(-1.1)).collect();
            let total: f64 = w.iter().sum();
            w.iter()
                .scan(0.0, |acc, x| {
                    *acc += x / total;
                    Some(*acc)
                })
                .collect()
        })
        .collect();
    let mut rng = fast_rng(stream_seed(seed, u64::MAX));
    let mut values = Vec::with_capacity(n * 16);
    for _ in 0..n {
        for j in 0..8 {
            let mu = -0.6 + 0.15 * j as f64;
            // Box–Muller, rejected outside [-1, 1] (truncation).
            let t = loop {
                let (u1, u2) = (1.0 - uniform01(&mut rng), uniform01(&mut rng));
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let t = mu + 0.25 * z;
                if (-1.0..=1.0).contains(&t) {
                    break t;
                }
            };
            values.push(Value::Unit(t));
        }
        for cdf in &cdfs {
            let u = uniform01(&mut rng);
            let v = cdf.iter().position(|&c| u < c).unwrap_or(cdf.len() - 1);
            values.push(Value::Category(v as u32));
        }
    }
    let file = SchemaFile { attributes: attributes.into_iter().map(Into::into).collect(), ..Default::default() };
    Ok((file, data::Encoded { values, n, skipped: 0, clamped: 0 }))
}

#[derive(Serialize)]
struct Output {
    data: String,
    n: usize,
    d: usize,
    runs: usize,
    seed: u64,
    skipped_rows: usize,
    clamped_values: usize,
    parse_seconds: f64,
    results: Vec<RunResult>,
}

#[derive(Serialize)]
struct RunResult {
    epsilon: f64,
    strategy: &'static str,
    k: usize,
    numeric_mechanism: &'static str,
    categorical_mechanism: &'static str,
    numeric_mse: Option<f64>,
    /// Standard error of `numeric_mse` over the runs (sd of the per-run mean squared error / √R):
    /// how far the empirical MSE itself may be from its expectation.
    numeric_mse_std_error: Option<f64>,
    numeric_predicted_mse: Option<f64>,
    categorical_mse: Option<f64>,
    /// Standard error of `categorical_mse` over the runs.
    categorical_mse_std_error: Option<f64>,
    categorical_predicted_mse: Option<f64>,
    categorical_linf: Option<f64>,
    ci_coverage: f64,
    seconds: f64,
    seconds_per_run: f64,
    attributes: Vec<AttrResult>,
    /// Run 1's estimate document: what `harmony query` prints for a collection created with the
    /// same options and fed `harmony submit --simulate-devices --seed` (the same numbers).
    estimates: Option<harmony_protocol::estimates::EstimateDocument>,
}

/// One attribute's results. A numeric attribute with `missing = "report"` compares the mean of
/// its present values (run 1's estimate, as `harmony query` prints it) with the present values'
/// true mean, the missing share beside it; its `mse`, `predicted_mse` and `ci_coverage` are of
/// the mean the devices report (a missing value reported as the midpoint), the scale of the
/// closed-form variance.
#[derive(Serialize)]
#[serde(untagged)]
enum AttrResult {
    Numeric {
        name: String,
        kind: &'static str,
        true_mean: f64,
        estimate: f64,
        std_error: f64,
        ci95: [f64; 2],
        true_mean_unit: f64,
        estimate_unit: f64,
        std_error_unit: f64,
        /// The true share of missing values (`missing = "report"`).
        #[serde(skip_serializing_if = "Option::is_none")]
        true_missing_share: Option<f64>,
        /// Its estimate (run 1).
        #[serde(skip_serializing_if = "Option::is_none")]
        missing_share: Option<f64>,
        mse: f64,
        predicted_mse: f64,
        ci_coverage: f64,
    },
    Categorical {
        name: String,
        kind: &'static str,
        mse: f64,
        predicted_mse: f64,
        linf: f64,
        ci_coverage: f64,
        categories: Vec<CategoryResult>,
    },
}

#[derive(Serialize)]
struct CategoryResult {
    label: String,
    #[serde(rename = "true")]
    truth: f64,
    estimate: f64,
    std_error: f64,
    ci95: [f64; 2],
}

/// Ground truth per attribute, on the randomizers' scale: the mean of the reported values (a
/// missing value as the midpoint, 0) and, with `missing = "report"`, the present values' mean
/// and the share missing.
enum Truth {
    Numeric { mean: f64, sum_t2: f64, present: Option<(f64, f64)> },
    Categorical { freqs: Vec<f64> },
}

/// The mean of the values of `ts` whose presence category is 0, and the share missing.
fn present_truth(ts: &[f64], presence: &ColumnValues) -> Option<(f64, f64)> {
    let ColumnValues::Category(p) = presence else { return None };
    let (s, k) = ts.iter().zip(p).filter(|(_, m)| **m == 0).fold((0.0, 0usize), |(s, k), (t, _)| (s + t, k + 1));
    Some((s / k.max(1) as f64, 1.0 - k as f64 / ts.len().max(1) as f64))
}

fn truths(schema: &Schema, columns: &[ColumnValues], n: usize) -> Vec<Truth> {
    schema
        .attributes()
        .iter()
        .zip(columns)
        .enumerate()
        .map(|(j, (a, col))| match (a, col) {
            (Attribute::Numeric { .. }, ColumnValues::Unit(ts)) => {
                let (s, s2) = ts.iter().fold((0.0, 0.0), |(s, s2), t| (s + t, s2 + t * t));
                let present = schema.presence_of(j).and_then(|p| present_truth(ts, &columns[p]));
                Truth::Numeric { mean: s / n as f64, sum_t2: s2, present }
            }
            (Attribute::Categorical { categories, .. }, ColumnValues::Category(vs)) => {
                let mut c = vec![0.0; categories.len()];
                for &v in vs {
                    c[v as usize] += 1.0;
                }
                Truth::Categorical { freqs: c.iter().map(|x| x / n as f64).collect() }
            }
            _ => Truth::Categorical { freqs: Vec::new() },
        })
        .collect()
}

/// One run of simulated devices through a means task: the per-attribute estimates and the
/// estimate document.
/// Row-major inputs up to this size are laid out once and reused by every run (25–35% faster
/// per run for harmony and sample-k on Adult than laying out each chunk per run); larger
/// populations are simulated from their columns chunk by chunk (peak memory near the columns':
/// docs/DATA.md). Both give the same accumulator.
const ROWS_MAX_BYTES: usize = 256 << 20;

/// The devices' inputs: rows laid out once, or the columns.
fn rows_if_small(columns: &harmony_data::Columns) -> Option<Vec<Value>> {
    let bytes = columns.n * (columns.columns.len() * size_of::<Value>() + size_of::<Input>());
    (bytes <= ROWS_MAX_BYTES).then(|| columns.to_rows().values)
}

fn run_once(
    task: &MeansTask,
    rows: Option<&[Input]>,
    columns: &[ColumnValues],
    seed: u64,
) -> Result<(Vec<AttributeEstimate>, EstimateDocument)> {
    let agg = match rows {
        Some(inputs) => harmony_tasks::simulate::run(task, inputs, seed)?,
        None => harmony_tasks::simulate::run_columns(task, columns, seed)?,
    };
    let typed = Typed::<RecordAggregator>::of(agg.as_ref())?;
    let doc = EstimateDocument {
        collection: "simulation".into(),
        reports: agg.count(),
        epsilon: task.config().epsilon,
        result: task.document(typed).into(),
    };
    Ok((typed.estimates(), doc))
}

/// Loads data and schema as `simulate` (every task) and `train` resolve them, streaming the data
/// (any format `harmony-data` reads) batch by batch into encoded rows (a second pass when the
/// schema is inferred): the table is never held as text.
pub fn load_inputs(
    data: &Option<PathBuf>,
    schema: &Option<PathBuf>,
    max_categories: usize,
) -> Result<(String, SchemaFile, data::Encoded)> {
    let (data_path, file, options) = sources(data, schema, max_categories)?;
    let loaded = harmony_data::load(&data_path, file, &options)?;
    if let Some(inf) = &loaded.inference {
        note_inference(&data_path, inf);
    }
    Ok((data_path.display().to_string(), loaded.file, loaded.encoded))
}

/// [`load_inputs`] by attribute (the means simulation's input: 8 bytes per number, 4 per
/// category, never a `Value` per cell).
fn load_columns(
    data: &Option<PathBuf>,
    schema: &Option<PathBuf>,
    max_categories: usize,
) -> Result<(String, SchemaFile, harmony_data::Columns)> {
    let (data_path, file, options) = sources(data, schema, max_categories)?;
    let loaded = harmony_data::load_columns(&data_path, file, &options)?;
    if let Some(inf) = &loaded.inference {
        note_inference(&data_path, inf);
    }
    Ok((data_path.display().to_string(), loaded.file, loaded.columns))
}

/// The data path (Adult when none), the schema file given (the bundled one with Adult) and the
/// inference options.
fn sources(
    data: &Option<PathBuf>,
    schema: &Option<PathBuf>,
    max_categories: usize,
) -> Result<(PathBuf, Option<SchemaFile>, harmony_data::InferOptions)> {
    let (data_path, schema_path) = match (data, schema) {
        (None, None) => (data::bundled("data/adult.csv"), Some(data::bundled("examples/adult.toml"))),
        (None, Some(s)) => (data::bundled("data/adult.csv"), Some(s.clone())),
        (Some(d), s) => (d.clone(), s.clone()),
    };
    let file = schema_path.map(|p| SchemaFile::load(&p)).transpose()?;
    Ok((data_path, file, harmony_data::InferOptions { max_categories, ..Default::default() }))
}

fn note_inference(data_path: &std::path::Path, inf: &harmony_data::Inference) {
    eprintln!(
        "note: no --schema given; inferred one from {} ({} attributes; see `harmony schema infer`)",
        data_path.display(),
        inf.file.attributes.len()
    );
    for w in &inf.warnings {
        eprintln!("warning: {w}");
    }
}

/// The data `harmony simulate` runs on (the `--synthetic` table or the CSV and schema), with a
/// note of the rows the invalid-value policy skipped or clamped.
fn means_data(args: &SimulateArgs) -> Result<(String, SchemaFile, harmony_data::Columns)> {
    let (data_name, file, enc) = match args.synthetic {
        Some(n) => {
            let (file, enc) = synthetic(n, args.seed)?;
            let columns = harmony_data::columns_from_rows(&file.schema()?, &enc.values);
            (format!("synthetic ({n} devices, 16 attributes)"), file, columns)
        }
        None => load_columns(&args.data, &args.schema, args.max_categories)?,
    };
    if enc.skipped > 0 || enc.clamped > 0 {
        let what = if file.invalid == InvalidPolicy::Skip { "skip" } else { "clamp" };
        eprintln!(
            "note: invalid-value policy \"{what}\": {} rows skipped, {} values clamped",
            enc.skipped, enc.clamped
        );
    }
    Ok((data_name, file, enc))
}

/// Runs `harmony simulate`.
pub fn run(args: SimulateArgs) -> Result<()> {
    if args.runs == 0 {
        bail!("--runs is 0, expected an integer >= 1");
    }
    if args.poison.poison.is_some() {
        return crate::simulate_tasks::poison::run(&args);
    }
    crate::simulate_tasks::run(&args)
}

/// Runs `harmony simulate means`: every strategy at every ε, scored against the truth.
pub fn run_means(args: &SimulateArgs) -> Result<()> {
    let t_parse = Instant::now();
    let (data_name, file, enc) = means_data(args)?;
    let schema = file.schema()?;
    let parse_seconds = t_parse.elapsed().as_secs_f64();
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let strategies = crate::specs::strategies(&args.means, &file)?;
    let n = enc.n;
    let truth = truths(&schema, &enc.columns, n);
    // Every value checked once (data preparation, like the parse: not timed).
    schema.check_columns(&enc.columns)?;
    let rows = rows_if_small(&enc);
    let inputs: Option<Vec<Input>> = rows.as_ref().map(|v| v.chunks_exact(schema.len()).map(Input::Record).collect());

    let pb = progress((epsilons.len() * strategies.len() * args.runs) as u64, "simulate", args.format);
    let mut results = Vec::new();
    for &eps in &epsilons {
        for &kind in &strategies {
            let spec = crate::specs::means(&args.means, &file, kind)?;
            let req = CreateCollection { schema: Some(schema.clone()), epsilon: eps, task: spec.into() };
            let task = harmony_tasks::resolve(&req, "simulation")
                .and_then(MeansTask::new)
                .with_context(|| format!("strategy {} at epsilon {eps}", kind.name()))?;
            let records = |seed| run_once(&task, inputs.as_deref(), &enc.columns, seed);
            if results.is_empty() {
                // Untimed warm-up, once per process: starts the thread pool and faults in the
                // buffers, so `seconds_per_run` times runs, not process start-up.
                records(stream_seed(args.seed, u64::MAX - 1))?;
            }
            let start = Instant::now();
            let mut acc = Accumulator::new(&schema);
            let mut first = None;
            for r in 0..args.runs {
                let (est, doc) = records(run_seed(args.seed, r as u64))?;
                acc.add(&est, &truth, r == 0);
                first.get_or_insert(doc);
                pb.inc(1);
            }
            let seconds = start.elapsed().as_secs_f64();
            let mut result = acc.finish(task.mechanism(), &schema, &truth, n, args.runs, seconds);
            present_values(&mut result.attributes, &schema, &truth, first.as_ref());
            result.estimates = first;
            results.push(result);
        }
    }
    pb.finish_and_clear();
    let out = Output {
        data: data_name,
        n,
        d: schema.len(),
        runs: args.runs,
        seed: args.seed,
        skipped_rows: enc.skipped,
        clamped_values: enc.clamped,
        parse_seconds,
        results,
    };
    crate::output::emit(&out, args.format, args.plot.as_deref(), write_plot, print_table)
}

/// MSE against ε, one line per strategy (with its mechanisms), numeric and categorical panels.
fn write_plot(path: &std::path::Path, out: &Output) -> Result<()> {
    use crate::plot::{Panel, Series};
    let panel = |title: &str, y_label: &str, pick: fn(&RunResult) -> (Option<f64>, &'static str)| {
        let mut series: Vec<Series> = Vec::new();
        for r in &out.results {
            let (mse, mechanism) = pick(r);
            let Some(mse) = mse else { continue };
            let label = format!("{} ({mechanism})", r.strategy);
            match series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((r.epsilon, mse)),
                None => series.push(Series { label, points: vec![(r.epsilon, mse)] }),
            }
        }
        for s in &mut series {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Panel { title: title.into(), y_label: y_label.into(), series }
    };
    let panels: Vec<Panel> = [
        panel("numeric attributes", "MSE of means on [-1, 1]", |r| (r.numeric_mse, r.numeric_mechanism)),
        panel("categorical attributes", "MSE of frequencies", |r| (r.categorical_mse, r.categorical_mechanism)),
    ]
    .into_iter()
    .filter(|p| !p.series.is_empty())
    .collect();
    let title = format!("{}: n = {}, {} runs", out.data, out.n, out.runs);
    crate::plot::line_panels_png(path, &title, &panels)
}

/// Per-attribute accumulation over runs.
struct Accumulator {
    sq_err: Vec<f64>,
    linf: Vec<f64>,
    covered: Vec<u64>,
    cells: Vec<u64>,
    first: Vec<AttributeEstimate>,
    /// Per run: the squared error averaged over numeric attributes, and over categorical
    /// attributes of their per-category mean (the run's contribution to the two MSEs).
    run_num: Moments,
    run_cat: Moments,
}

impl Accumulator {
    fn new(schema: &Schema) -> Self {
        let d = schema.len();
        Accumulator {
            sq_err: vec![0.0; d],
            linf: vec![0.0; d],
            covered: vec![0; d],
            cells: vec![0; d],
            first: vec![],
            run_num: Moments::default(),
            run_cat: Moments::default(),
        }
    }

    fn add(&mut self, est: &[AttributeEstimate], truth: &[Truth], first: bool) {
        let (mut num, mut cat) = ((0.0, 0usize), (0.0, 0usize));
        for (j, (e, t)) in est.iter().zip(truth).enumerate() {
            match (e, t) {
                (AttributeEstimate::Numeric(e), Truth::Numeric { mean, .. }) => {
                    let sq = (e.value - mean).powi(2);
                    self.sq_err[j] += sq;
                    num = (num.0 + sq, num.1 + 1);
                    self.covered[j] += e.covers(*mean) as u64;
                    self.cells[j] += 1;
                }
                (AttributeEstimate::Categorical(fe), Truth::Categorical { freqs }) => {
                    let (mut worst, mut sum): (f64, f64) = (0.0, 0.0);
                    for (v, &f) in freqs.iter().enumerate() {
                        let err = fe.frequencies[v] - f;
                        sum += err * err;
                        worst = worst.max(err.abs());
                        self.covered[j] += fe.get(v).covers(f) as u64;
                        self.cells[j] += 1;
                    }
                    self.sq_err[j] += sum;
                    self.linf[j] += worst;
                    cat = (cat.0 + sum / freqs.len() as f64, cat.1 + 1);
                }
                _ => unreachable!("estimate kinds follow the schema"),
            }
        }
        if num.1 > 0 {
            self.run_num.push(num.0 / num.1 as f64);
        }
        if cat.1 > 0 {
            self.run_cat.push(cat.0 / cat.1 as f64);
        }
        if first {
            self.first = est.to_vec();
        }
    }

    /// One attribute's results over the runs.
    fn attribute(
        &self,
        j: usize,
        a: &Attribute,
        truth: &Truth,
        mech: &RecordMechanism,
        n: usize,
        runs: usize,
    ) -> AttrResult {
        let (nf, r) = (n as f64, runs as f64);
        let coverage = self.covered[j] as f64 / self.cells[j] as f64;
        match (a, truth, &self.first[j]) {
            (
                Attribute::Numeric { name, min, max },
                Truth::Numeric { mean, sum_t2, .. },
                AttributeEstimate::Numeric(e),
            ) => {
                let half = 0.5 * (max - min);
                let mid = 0.5 * (max + min);
                let units = e.affine(half, mid);
                let mse = self.sq_err[j] / r;
                let predicted = mech.numeric_variance(j, *mean * nf, *sum_t2, nf);
                AttrResult::Numeric {
                    name: name.clone(),
                    kind: "numeric",
                    true_mean: half * mean + mid,
                    estimate: units.value,
                    std_error: units.std_error,
                    ci95: units.ci95,
                    true_mean_unit: *mean,
                    estimate_unit: e.value,
                    std_error_unit: e.std_error,
                    true_missing_share: None,
                    missing_share: None,
                    mse,
                    predicted_mse: predicted,
                    ci_coverage: coverage,
                }
            }
            (
                Attribute::Categorical { name, categories },
                Truth::Categorical { freqs },
                AttributeEstimate::Categorical(fe),
            ) => {
                let k = categories.len() as f64;
                let mse = self.sq_err[j] / (r * k);
                let predicted = mech.categorical_variance(j, freqs, nf).iter().sum::<f64>() / k;
                let linf = self.linf[j] / r;
                AttrResult::Categorical {
                    name: name.clone(),
                    kind: "categorical",
                    mse,
                    predicted_mse: predicted,
                    linf,
                    ci_coverage: coverage,
                    categories: categories
                        .iter()
                        .enumerate()
                        .map(|(v, label)| {
                            let e = fe.get(v);
                            CategoryResult {
                                label: label.clone(),
                                truth: freqs[v],
                                estimate: e.value,
                                std_error: e.std_error,
                                ci95: e.ci95,
                            }
                        })
                        .collect(),
                }
            }
            _ => unreachable!("estimate kinds follow the schema"),
        }
    }

    fn finish(
        &self,
        mech: &RecordMechanism,
        schema: &Schema,
        truth: &[Truth],
        n: usize,
        runs: usize,
        seconds: f64,
    ) -> RunResult {
        let r = runs as f64;
        let attributes: Vec<AttrResult> = schema
            .attributes()
            .iter()
            .enumerate()
            .map(|(j, a)| self.attribute(j, a, &truth[j], mech, n, runs))
            .collect();
        let (mut num, mut cat) = ((0.0, 0.0, 0), (0.0, 0.0, 0.0, 0));
        for a in &attributes {
            match a {
                AttrResult::Numeric { mse, predicted_mse, .. } => num = (num.0 + mse, num.1 + predicted_mse, num.2 + 1),
                AttrResult::Categorical { mse, predicted_mse, linf, .. } => {
                    cat = (cat.0 + mse, cat.1 + predicted_mse, cat.2 + linf, cat.3 + 1)
                }
            }
        }
        let (covered, cells) = (self.covered.iter().sum::<u64>(), self.cells.iter().sum::<u64>());
        let avg = |s: f64, c: usize| if c == 0 { None } else { Some(s / c as f64) };
        let (num_name, cat_name) = mech.mechanism_names();
        RunResult {
            epsilon: mech.options().epsilon,
            strategy: mech.options().kind.name(),
            k: mech.k(),
            numeric_mechanism: num_name,
            categorical_mechanism: cat_name,
            numeric_mse: avg(num.0, num.2),
            numeric_mse_std_error: mean_std_error(&self.run_num),
            numeric_predicted_mse: avg(num.1, num.2),
            categorical_mse: avg(cat.0, cat.3),
            categorical_mse_std_error: mean_std_error(&self.run_cat),
            categorical_predicted_mse: avg(cat.1, cat.3),
            categorical_linf: avg(cat.2, cat.3),
            ci_coverage: covered as f64 / cells as f64,
            seconds,
            seconds_per_run: seconds / r,
            attributes,
            estimates: None,
        }
    }
}

/// Attributes with `missing = "report"`: the present values' true mean and run 1's estimate of
/// it (from its estimate document, what `harmony query` prints), the missing share beside them.
fn present_values(attributes: &mut [AttrResult], schema: &Schema, truth: &[Truth], doc: Option<&EstimateDocument>) {
    let Some(Ok(m)) = doc.map(|d| <&MeansEstimate>::try_from(&d.result)) else { return };
    for (j, a) in attributes.iter_mut().enumerate() {
        let (
            AttrResult::Numeric {
                true_mean,
                estimate,
                std_error,
                ci95,
                true_mean_unit,
                estimate_unit,
                std_error_unit,
                true_missing_share,
                missing_share,
                ..
            },
            Truth::Numeric { present: Some((t, share)), .. },
            Attribute::Numeric { min, max, .. },
        ) = (a, &truth[j], &schema.attributes()[j])
        else {
            continue;
        };
        let Some(harmony_protocol::estimates::AttributeResult::Numeric { mean, unit, missing, .. }) =
            m.attributes.get(j)
        else {
            continue;
        };
        let nan = f64::NAN;
        (*true_mean_unit, *true_mean) = (*t, 0.5 * (max - min) * t + 0.5 * (max + min));
        (*estimate, *std_error) = (mean.estimate.unwrap_or(nan), mean.std_error.unwrap_or(nan));
        *ci95 = mean.ci95.unwrap_or([nan, nan]);
        (*estimate_unit, *std_error_unit) = (unit.estimate.unwrap_or(nan), unit.std_error.unwrap_or(nan));
        *true_missing_share = Some(*share);
        *missing_share = missing.as_ref().and_then(|e| e.estimate);
    }
}

/// Standard error of the mean of the values pushed into `m` (sample standard deviation / √n);
/// `None` below 2 values.
fn mean_std_error(m: &Moments) -> Option<f64> {
    (m.n >= 2).then(|| (m.variance() / m.n as f64).sqrt())
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.3e}")).unwrap_or_else(|| "-".into())
}

/// "empirical / predicted ± standard error of that ratio over the runs".
fn ratio(a: Option<f64>, se: Option<f64>, b: Option<f64>) -> String {
    match (a, se, b) {
        (Some(a), Some(se), Some(b)) if b > 0.0 => format!("{:.2}±{:.2}", a / b, se / b),
        (Some(a), None, Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

fn print_table(out: &Output) {
    println!(
        "harmony simulate: {} — n = {} devices, d = {} attributes, {} runs, seed {} (parse {:.2} s)",
        out.data, out.n, out.d, out.runs, out.seed, out.parse_seconds
    );
    println!("MSE: numeric on the [-1, 1] scale, categorical on frequencies averaged over categories;");
    println!("pred = closed-form variance; ratio = MSE / pred ± its standard error over the runs;");
    println!("cover = share of 95% CIs (runs × attributes × categories) covering the truth.");
    println!();
    println!(
        "{:>5}  {:<9} {:>3}  {:<12} {:<14} {:>10} {:>10} {:>10}  {:>10} {:>10} {:>10}  {:>6} {:>8}",
        "eps",
        "strategy",
        "k",
        "numeric",
        "categorical",
        "num MSE",
        "num pred",
        "ratio",
        "cat MSE",
        "cat pred",
        "ratio",
        "cover",
        "s/run"
    );
    for r in &out.results {
        println!(
            "{:>5}  {:<9} {:>3}  {:<12} {:<14} {:>10} {:>10} {:>10}  {:>10} {:>10} {:>10}  {:>5.1}% {:>8.3}",
            r.epsilon,
            r.strategy,
            r.k,
            r.numeric_mechanism,
            r.categorical_mechanism,
            fmt_opt(r.numeric_mse),
            fmt_opt(r.numeric_predicted_mse),
            ratio(r.numeric_mse, r.numeric_mse_std_error, r.numeric_predicted_mse),
            fmt_opt(r.categorical_mse),
            fmt_opt(r.categorical_predicted_mse),
            ratio(r.categorical_mse, r.categorical_mse_std_error, r.categorical_predicted_mse),
            100.0 * r.ci_coverage,
            r.seconds_per_run
        );
    }
    if let Some(best) = recommended(&out.results) {
        println!();
        println!(
            "Estimates beside the truth, run 1 of eps = {} / {} (recommended: the least mean MSE over attributes at the ε nearest 1; ± 1.96·SE):",
            best.epsilon, best.strategy
        );
        print_estimates(best);
    }
}

/// The configuration whose estimates the table shows: at the ε nearest 1 (on a log scale), the
/// strategy with the least MSE averaged over attributes.
fn recommended(results: &[RunResult]) -> Option<&RunResult> {
    let distance = |r: &RunResult| r.epsilon.ln().abs();
    let eps = results.iter().min_by(|a, b| distance(a).total_cmp(&distance(b)))?.epsilon;
    let score = |r: &RunResult| {
        let mses: Vec<f64> = r
            .attributes
            .iter()
            .map(|a| match a {
                AttrResult::Numeric { mse, .. } | AttrResult::Categorical { mse, .. } => *mse,
            })
            .collect();
        mses.iter().sum::<f64>() / mses.len().max(1) as f64
    };
    results.iter().filter(|r| r.epsilon == eps).min_by(|a, b| score(a).total_cmp(&score(b)))
}

/// One configuration's run-1 estimates beside the truth: every numeric mean (with the missing
/// share of an attribute that reports it), the three most frequent labels of each categorical
/// attribute.
fn print_estimates(r: &RunResult) {
    for a in &r.attributes {
        match a {
            AttrResult::Numeric { name, true_mean, estimate, std_error, true_missing_share, missing_share, .. } => {
                let missing = match (true_missing_share, missing_share) {
                    (Some(t), Some(e)) => format!("   (mean of present; missing: true {t:.4}, estimate {e:.4})"),
                    _ => String::new(),
                };
                println!(
                    "  {name:<24} true {true_mean:>14.4}   estimate {estimate:>14.4} ± {:>12.4}{missing}",
                    Z95 * std_error
                );
            }
            AttrResult::Categorical { name, categories, .. } => {
                let mut top: Vec<&CategoryResult> = categories.iter().collect();
                top.sort_by(|a, b| b.truth.total_cmp(&a.truth));
                for c in top.iter().take(3) {
                    let label = format!("{name}={}", c.label);
                    println!(
                        "  {label:<24} true {:>14.4}   estimate {:>14.4} ± {:>12.4}",
                        c.truth,
                        c.estimate,
                        Z95 * c.std_error
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_std_error_is_the_sample_sd_over_root_n() {
        let moments = |xs: &[f64]| {
            let mut m = Moments::default();
            xs.iter().for_each(|&x| m.push(x));
            m
        };
        assert_eq!(mean_std_error(&moments(&[])), None);
        assert_eq!(mean_std_error(&moments(&[3.0])), None);
        // mean 2.5, sample variance 5/3, SE √(5/3/4).
        let se = mean_std_error(&moments(&[1.0, 2.0, 3.0, 4.0])).unwrap();
        assert!((se - (5.0f64 / 12.0).sqrt()).abs() < 1e-15, "{se}");
        assert_eq!(ratio(Some(2.0), Some(0.2), Some(4.0)), "0.50±0.05");
        assert_eq!(ratio(Some(2.0), None, Some(4.0)), "0.50");
        assert_eq!(ratio(None, None, Some(4.0)), "-");
    }

    /// The MSEs are the means of the per-run values whose spread gives their standard errors;
    /// the numeric SE is near its Gaussian value √(2/R)·(root mean square of the attributes'
    /// MSEs)/√d_n when the attributes' errors are independent (loose bounds: 40 runs).
    #[test]
    fn mse_standard_errors_match_the_per_run_mean_squared_errors() {
        let (file, enc) = synthetic(20_000, 3).unwrap();
        let schema = file.schema().unwrap();
        let columns = harmony_data::columns_from_rows(&schema, &enc.values).columns;
        let truth = truths(&schema, &columns, enc.n);
        let runs = 40;
        for kind in [harmony_core::strategy::StrategyKind::Split, harmony_core::strategy::StrategyKind::SampleK] {
            let spec = harmony_protocol::spec::MeansSpec { strategy: kind, ..Default::default() };
            let req = CreateCollection { schema: Some(schema.clone()), epsilon: 1.0, task: spec.into() };
            let task = harmony_tasks::resolve(&req, "t").and_then(MeansTask::new).unwrap();
            let mut acc = Accumulator::new(&schema);
            for r in 0..runs {
                acc.add(&run_once(&task, None, &columns, stream_seed(9, r)).unwrap().0, &truth, r == 0);
            }
            assert_eq!((acc.run_num.n, acc.run_cat.n), (runs, runs));
            let out = acc.finish(task.mechanism(), &schema, &truth, enc.n, runs as usize, 1.0);
            let (num, cat) = (out.numeric_mse.unwrap(), out.categorical_mse.unwrap());
            assert!((num - acc.run_num.mean).abs() <= 1e-12 * num, "{num}");
            assert!((cat - acc.run_cat.mean).abs() <= 1e-12 * cat, "{cat}");
            let mses: Vec<f64> = out
                .attributes
                .iter()
                .filter_map(|a| match a {
                    AttrResult::Numeric { mse, .. } => Some(*mse),
                    _ => None,
                })
                .collect();
            let d = mses.len() as f64;
            let gaussian = (2.0 / runs as f64).sqrt() * (mses.iter().map(|m| m * m).sum::<f64>() / d).sqrt() / d.sqrt();
            let se = out.numeric_mse_std_error.unwrap();
            assert!(se > 0.5 * gaussian && se < 2.0 * gaussian, "{kind:?}: SE {se} vs Gaussian {gaussian}");
            assert!(out.categorical_mse_std_error.unwrap() > 0.0);
        }
    }
}
