//! `harmony simulate --task …`: analyses beyond per-attribute means and frequencies, each in its
//! own module and reusing simulate's data, schema, runs, seed, JSON and plot conventions.
//!
//! - `range`, `quantiles`: [`range`] (harmony_analytics::range);
//! - `range2d`: [`range2d`] (harmony_analytics::range::grid2d);
//! - `heavy-hitters`: [`heavy`] (harmony_analytics::heavy);
//! - `marginals`: [`marginals`] (harmony_analytics::marginals);
//! - `linear-queries`: [`linear`] (harmony_analytics::linear);
//! - `frequency`: [`frequency`], `train`: [`train`] (through harmony-tasks, as a server runs them);
//! - `--poison` (frequency, means): [`poison`] (harmony_tasks::poison).

use crate::data::SchemaFile;
use crate::simulate::SimulateArgs;
use crate::specs::MeansArgs;
use anyhow::{Result, anyhow};
use clap::{Args, ValueEnum};
use harmony_protocol::spec::TaskSpec;
use std::path::PathBuf;

mod frequency;
pub mod heavy;
mod linear;
pub mod marginals;
pub mod poison;
mod range;
mod range2d;
mod train;

/// A task of the command line: one of [`ALL`], chosen by its name (`--task range`, or `range`
/// after the command). `harmony simulate`'s default is `means`.
#[derive(Copy, Clone)]
pub struct Task(&'static CliTask);

impl Task {
    /// The task's name.
    pub fn name(self) -> &'static str {
        self.0.name
    }
    /// What the command line knows of it.
    pub fn cli(self) -> &'static CliTask {
        self.0
    }
    /// Whether it is the task `c` describes.
    pub fn is(self, c: &CliTask) -> bool {
        self.0.name == c.name
    }
}

impl PartialEq for Task {
    fn eq(&self, other: &Self) -> bool {
        self.is(other.0)
    }
}

impl Eq for Task {}

impl Default for Task {
    fn default() -> Self {
        Task(&crate::specs::MEANS)
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

/// Every task of [`ALL`] as a value of `--task`.
static VALUES: [Task; ALL.len()] = {
    let mut v = [Task(ALL[0]); ALL.len()];
    let mut i = 0;
    while i < ALL.len() {
        v[i] = Task(ALL[i]);
        i += 1;
    }
    v
};

impl ValueEnum for Task {
    fn value_variants<'a>() -> &'a [Self] {
        &VALUES
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name).help(self.0.about))
    }
}

/// Options of the analysis tasks (flattened into `harmony simulate`). Each task documents which
/// it reads; the others are ignored. New options go in their task's section.
#[derive(Args, Debug, Default)]
pub struct TaskArgs {
    /// What to estimate.
    #[arg(long, value_enum, default_value_t = Task::default())]
    pub task: Task,

    // ---- frequency, range, quantiles, heavy-hitters ----
    /// frequency/range/quantiles/heavy-hitters: the column to analyse.
    #[arg(long)]
    pub column: Option<String>,
    /// range/quantiles: discretize the column to this many equal-width bins over [min, max]
    /// (default: the schema's `[bins]`, else 64; for one bin per integer of an integer column in
    /// [a, b], declare max = b + 1 in the schema and --bins b + 1 − a).
    #[arg(long)]
    pub bins: Option<usize>,
    /// range/quantiles: the hierarchy's branching factor B for `--method hh` (default: the B
    /// minimizing the closed-form variance).
    #[arg(long)]
    pub branching: Option<usize>,
    /// range: hh|haar|flat (comma-separated; default all); heavy-hitters: pem|treehist|sketch;
    /// marginals: calm|direct|fourier|… (comma-separated; default all).
    #[arg(long, value_delimiter = ',')]
    pub method: Option<Vec<String>>,
    /// range: the number of random ranges scored per run (default 1000); linear-queries: the
    /// workload (identity, prefix, or a CSV/JSON matrix or list of range/predicate queries file).
    #[arg(long)]
    pub queries: Option<String>,
    /// range/quantiles: ranges [LO, HI) in the column's units, `LO:HI` comma-separated, answered
    /// in the estimate document (as `harmony query --ranges`).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub ranges: Option<Vec<String>>,
    /// range/quantiles: the quantile levels of the estimate document (comma-separated, each in
    /// (0, 1); default 0.1,0.5,0.9; as `harmony query --quantiles`).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub quantiles: Option<Vec<f64>>,
    /// range2d: levels L, 2^L bins per axis (default 5; 1 to 6).
    #[arg(long)]
    pub levels: Option<usize>,
    /// range2d: rectangles `X1:X2:Y1:Y2` ([X1, X2) × [Y1, Y2) in the columns' units),
    /// comma-separated, answered in the estimate document (as `harmony query --rects`).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub rects: Option<Vec<String>>,
    /// heavy-hitters: report the top K items (default 20).
    #[arg(long)]
    pub top: Option<usize>,
    /// heavy-hitters: a transactions file, one set of items per line (instead of --column).
    /// (`--column '*'` instead makes each CSV row the set of its `attribute=value` items.)
    #[arg(long)]
    pub transactions: Option<PathBuf>,
    /// heavy-hitters: the item separator of --transactions lines (default ',').
    #[arg(long)]
    pub separator: Option<char>,
    /// heavy-hitters: item codes: `hash` (strings hashed to --item-bits bits; default) or `id`
    /// (items are unsigned integers below 2^bits − 1).
    #[arg(long)]
    pub items: Option<String>,
    /// heavy-hitters: the code length B in bits (default 32).
    #[arg(long)]
    pub item_bits: Option<u32>,
    /// heavy-hitters, set-valued inputs: pad each set to L items before sampling one (default:
    /// the 90th percentile of the set sizes).
    #[arg(long)]
    pub pad_length: Option<usize>,

    // ---- marginals, linear-queries ----
    /// marginals/linear-queries: the attributes to use (comma-separated; default all categorical
    /// and binned numeric ones).
    #[arg(long, value_delimiter = ',')]
    pub attributes: Option<Vec<String>>,
    /// linear-queries: δ of the Gaussian mechanism ((ε, δ)-LDP), in (0, 1) (default 1e-6).
    #[arg(long, allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// linear-queries with --synthetic N: the synthetic domain size J (values 0..J−1 drawn
    /// Zipf(1.1); default 1000).
    #[arg(long)]
    pub synthetic_domain: Option<usize>,
    /// linear-queries: where the Gaussian answers are projected: symmetric (conv{±a_v},
    /// Bassily's K; the default) or simplex (conv{a_v}, the answers of distributions).
    #[arg(long)]
    pub hull: Option<String>,

    // ---- marginals ----
    /// marginals: force CALM's marginal size l (default: chosen by minimising the predicted
    /// total SSE; l < k reconstructs the k-way marginals by maximum entropy).
    #[arg(long)]
    pub calm_l: Option<usize>,

    // ---- train ----
    /// train: the model and its rounds.
    #[command(flatten)]
    pub train: crate::server_cmds::rounds::TrainOptions,
}

/// What the command line knows of one task: the options it takes, its own wording of shared
/// ones, its examples, the spec `collection create` sends (and `demo`, `load`) and what
/// `simulate` runs. Each task's module holds its own (`range::CLI`, …); [`ALL`] lists them, and
/// the help pages, the option checks, the examples and the dispatch all read them from there.
pub struct CliTask {
    /// Its name (`heavy-hitters`, …): the value of `--task`.
    pub name: &'static str,
    /// What it estimates, one line (the task list of each command's help).
    pub about: &'static str,
    /// The ids of the [`TaskArgs`] options it takes (the others are refused).
    pub options: &'static [&'static str],
    /// Its own wording of options several tasks share: (id, help).
    pub help: &'static [(&'static str, &'static str)],
    /// The command options it refuses (model rounds keep no buckets: `period`, `recurring`).
    pub not_taken: &'static [&'static str],
    /// Two examples of `harmony simulate TASK`, each a `#` comment line and a command.
    pub simulate_examples: &'static str,
    /// Two examples of `harmony collection create TASK`.
    pub create_examples: &'static str,
    /// The one spec of a collection (its schema file, when one is given).
    pub spec: fn(&SpecArgs<'_>) -> Result<TaskSpec>,
    /// `harmony simulate TASK`.
    pub simulate: fn(&SimulateArgs) -> Result<()>,
    /// `harmony demo TASK`'s values of the options the task requires (Adult's columns).
    pub demo: Option<fn(&mut TaskArgs)>,
}

/// What a task's spec is built from: its options, the record strategy's, the schema file and ε.
pub struct SpecArgs<'a> {
    /// The task's options.
    pub task: &'a TaskArgs,
    /// The record strategy's options (`means`, and `frequency`'s oracle).
    pub means: &'a MeansArgs,
    /// `--schema`, if given.
    pub file: Option<&'a SchemaFile>,
    /// ε.
    pub epsilon: f64,
}

impl SpecArgs<'_> {
    /// The schema file, or an error naming the task that reads one.
    pub fn file(&self) -> Result<&SchemaFile> {
        self.file.ok_or_else(|| {
            anyhow!(
                "--schema is missing: --task {} reads the collection's attributes from a schema file (only heavy-hitters needs none)",
                self.task.task.name()
            )
        })
    }
}

/// Every task of the command line, in the order the help lists them.
pub const ALL: &[&CliTask] = &[
    &crate::specs::MEANS,
    &frequency::CLI,
    &range::CLI,
    &range::QUANTILES,
    &range2d::CLI,
    &heavy::CLI,
    &marginals::CLI,
    &linear::CLI,
    &train::CLI,
];

/// The task named `name` (`heavy-hitters`, …).
pub fn by_name(name: &str) -> Option<&'static CliTask> {
    ALL.iter().copied().find(|c| c.name == name)
}

/// Runs `harmony simulate` for a task other than `means` (which `simulate::run` runs itself).
pub fn run(args: &SimulateArgs) -> Result<()> {
    (args.task.task.cli().simulate)(args)
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_task_is_listed_once() {
        for t in Task::value_variants() {
            assert_eq!(ALL.iter().filter(|c| t.is(c)).count(), 1, "{}", t.name());
        }
        assert_eq!(Task::value_variants().len(), ALL.len());
        assert_eq!(Task::default().name(), "means");
        assert_eq!(Task::from_str("range2d", false).unwrap().name(), "range2d");
    }
}
