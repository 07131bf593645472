//! The experiment runner of `harmony simulate --task X`: settings (a method or strategy at an
//! ε, each a task spec) × runs, every run the analysis's devices through the task a server would
//! run (harmony-tasks), scored against the truth. One output for every analysis: per setting,
//! the named metrics' means and standard errors over the runs, the time per run and run 1's
//! estimate document (what `harmony query` prints for the same devices, bit for bit); rendered
//! as a table, JSON or a plot of a metric against ε.
//!
//! Run r uses `harmony_tasks::simulate::run_seed(seed, r)`: run 1 is `--seed` itself.

use crate::output::{Format, progress};
use crate::plot::{Panel, Series};
use crate::render::{self, Truth};
use anyhow::{Context, Result};
use harmony_core::estimate::Moments;
use harmony_core::schema::Schema;
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::spec::TaskSpec;
use harmony_tasks::simulate::run_seed;
use harmony_tasks::{Input, Task, TaskAggregator};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// One cell of the grid: a label (method, strategy…), an ε and the spec they make.
#[derive(Debug, Clone)]
pub struct Setting {
    /// What varies besides ε (`hh`, `calm`, `sample-k`…).
    pub label: String,
    /// ε of one report.
    pub epsilon: f64,
    /// The task's spec.
    pub spec: TaskSpec,
}

impl Setting {
    /// Every (labelled spec, ε) pair, the specs outermost: the settings of most analyses.
    pub fn grid(specs: impl IntoIterator<Item = (String, TaskSpec)>, epsilons: &[f64]) -> Vec<Setting> {
        let mut out = Vec::new();
        for (label, spec) in specs {
            for &epsilon in epsilons {
                out.push(Setting { label: label.clone(), epsilon, spec: spec.clone() });
            }
        }
        out
    }
}

/// One run's score: named metrics (e.g. `mse`, `predicted_mse`, `f1`).
pub type Metrics = Vec<(&'static str, f64)>;

/// How a column shows its metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Show {
    /// The mean, in scientific notation (errors, variances).
    Sci,
    /// The mean as a percentage (coverage, recall).
    Percent,
    /// The ratio of the mean to another metric's (its closed form) ± its standard error.
    Ratio(&'static str),
}

/// A column of the table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header.
    pub header: &'static str,
    /// The metric's name.
    pub metric: &'static str,
    /// How it is shown.
    pub show: Show,
}

/// An analysis as an experiment.
pub trait Analysis {
    /// What the table's first line says (data, n, the analysis's options).
    fn title(&self) -> String;
    /// The schema devices hold (None: item sets).
    fn schema(&self) -> Option<Schema>;
    /// The grid.
    fn settings(&self) -> Result<Vec<Setting>>;
    /// One input per device, in order.
    fn inputs(&self) -> Vec<Input<'_>>;
    /// The query asked of each run's estimates (ranges, quantiles).
    fn query(&self) -> Query {
        Query::default()
    }
    /// Scores one run.
    fn metrics(
        &self,
        setting: &Setting,
        task: &dyn Task,
        agg: &dyn TaskAggregator,
        doc: &EstimateDocument,
    ) -> Result<Metrics>;
    /// The table's columns.
    fn columns(&self) -> Vec<Column>;
    /// The truth printed beside run 1's document.
    fn truth(&self) -> Option<Truth> {
        None
    }
    /// The metric plotted against ε by `--plot` (one line per label).
    fn plot_metric(&self) -> (&'static str, &'static str) {
        ("mse", "MSE")
    }
}

/// A metric over the runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    /// Mean over the runs.
    pub mean: f64,
    /// Its standard error (sd over the runs / √R; null with one run).
    pub std_error: Option<f64>,
}

/// One setting's results.
#[derive(Debug, Serialize)]
pub struct CellResult {
    /// The label.
    pub label: String,
    /// ε.
    pub epsilon: f64,
    /// Every metric over the runs.
    pub metrics: BTreeMap<&'static str, Summary>,
    /// Seconds per run (devices and estimate).
    pub seconds_per_run: f64,
    /// Run 1's estimate document.
    pub estimates: EstimateDocument,
}

/// The whole experiment.
#[derive(Debug, Serialize)]
pub struct Output {
    /// The title.
    pub title: String,
    /// Devices.
    pub n: usize,
    /// Runs per setting.
    pub runs: usize,
    /// The seed (run 1's).
    pub seed: u64,
    /// One per setting.
    pub results: Vec<CellResult>,
    /// The truth of run 1's documents.
    pub truth: Option<Truth>,
}

/// Runs every setting `runs` times.
pub fn run(a: &dyn Analysis, runs: usize, seed: u64) -> Result<Output> {
    let inputs = a.inputs();
    let settings = a.settings()?;
    let pb = progress((settings.len() * runs) as u64, "simulate", Format::Table);
    let mut results = Vec::with_capacity(settings.len());
    for s in &settings {
        let req = CreateCollection { schema: a.schema(), epsilon: s.epsilon, task: s.spec.clone() };
        let config =
            harmony_tasks::resolve(&req, "simulation").with_context(|| format!("{} at ε = {}", s.label, s.epsilon))?;
        let task = harmony_tasks::build(&config)?;
        let start = Instant::now();
        let (mut moments, mut first) = (BTreeMap::<&'static str, Moments>::new(), None);
        for r in 0..runs {
            let agg = harmony_tasks::simulate::run(task.as_ref(), &inputs, run_seed(seed, r as u64))?;
            let result = task.estimate(agg.as_ref(), &a.query())?;
            let doc =
                EstimateDocument { collection: "simulation".into(), reports: agg.count(), epsilon: s.epsilon, result };
            for (name, v) in a.metrics(s, task.as_ref(), agg.as_ref(), &doc)? {
                moments.entry(name).or_default().push(v);
            }
            first.get_or_insert(doc);
            pb.inc(1);
        }
        let metrics = moments
            .into_iter()
            .map(|(k, m)| {
                (k, Summary { mean: m.mean, std_error: (m.n > 1).then(|| (m.variance() / m.n as f64).sqrt()) })
            })
            .collect();
        results.push(CellResult {
            label: s.label.clone(),
            epsilon: s.epsilon,
            metrics,
            seconds_per_run: start.elapsed().as_secs_f64() / runs.max(1) as f64,
            estimates: first.context("no run")?,
        });
    }
    pb.finish_and_clear();
    Ok(Output { title: a.title(), n: inputs.len(), runs, seed, results, truth: a.truth() })
}

fn cell(c: &CellResult, col: &Column) -> String {
    let Some(m) = c.metrics.get(col.metric) else { return "-".into() };
    match col.show {
        Show::Sci => format!("{:.3e}", m.mean),
        Show::Percent => format!("{:.1}%", 100.0 * m.mean),
        Show::Ratio(p) => match (c.metrics.get(p), m.std_error) {
            (Some(p), Some(se)) if p.mean > 0.0 => format!("{:.2}±{:.2}", m.mean / p.mean, se / p.mean),
            (Some(p), None) if p.mean > 0.0 => format!("{:.2}", m.mean / p.mean),
            _ => "-".into(),
        },
    }
}

/// Prints the table, then run 1's document of the first setting beside the truth.
pub fn print_table(a: &dyn Analysis, out: &Output) {
    println!("{} ({} runs, seed {})", out.title, out.runs, out.seed);
    let cols = a.columns();
    let mut head = format!("{:>6}  {:<24}", "eps", "setting");
    for c in &cols {
        head.push_str(&format!(" {:>13}", c.header));
    }
    println!("{head} {:>9}", "s/run");
    for r in &out.results {
        let mut line = format!("{:>6}  {:<24}", r.epsilon, r.label);
        for c in &cols {
            line.push_str(&format!(" {:>13}", cell(r, c)));
        }
        println!("{line} {:>9.3}", r.seconds_per_run);
    }
    if cols.iter().any(|c| matches!(c.show, Show::Ratio(_))) {
        println!(
            "(a column compared with its closed form shows empirical / predicted ± its standard error over the runs)"
        );
    }
    if let Some(r) = out.results.first() {
        println!("\nrun 1 of {} at ε = {}:", r.label, r.epsilon);
        render::print(&r.estimates, out.truth.as_ref());
    }
}

/// `--plot`: the analysis's metric against ε, one line per label.
pub fn write_plot(a: &dyn Analysis, path: &Path, out: &Output) -> Result<()> {
    let (metric, y_label) = a.plot_metric();
    let mut series: Vec<Series> = Vec::new();
    for r in &out.results {
        let Some(m) = r.metrics.get(metric) else { continue };
        match series.iter_mut().find(|s| s.label == r.label) {
            Some(s) => s.points.push((r.epsilon, m.mean)),
            None => series.push(Series { label: r.label.clone(), points: vec![(r.epsilon, m.mean)] }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    let panel = Panel { title: metric.into(), y_label: y_label.into(), series };
    crate::plot::line_panels_png(path, &format!("{}: {} runs", out.title, out.runs), &[panel])
}

/// Runs the experiment and emits it (`--format`, `--plot`).
pub fn emit(a: &dyn Analysis, runs: usize, seed: u64, format: Format, plot: Option<&Path>) -> Result<()> {
    let out = run(a, runs, seed)?;
    crate::output::emit(&out, format, plot, |p, o| write_plot(a, p, o), |o| print_table(a, o))
}
